"""The reviewer web page (flows/review_server.py) in process: logins, sessions, filters, the item
page, form tokens and origins, decisions, and the `thresher review serve | token` commands."""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
from html import unescape
from pathlib import Path

import polars as pl
import pytest
import yaml
from credential_factory import secret_sample
from fastapi.testclient import TestClient
from helpers import SMS_SOURCE, queue_for_review, write_project
from typer.testing import CliRunner

from data_catalog import review_queue
from data_catalog.catalog import Catalog
from flows.cli import app as cli_app
from flows.review_server import SESSION_COOKIE, create_app
from pipeline.config import PolicyConfig, ReviewConfig
from pipeline.core.schema import REVIEW_ITEM_SCHEMA


def queued_catalog(root: Path) -> tuple[Catalog, dict[str, str]]:
    """A catalog whose queue the governance stage filled from records with planted credentials,
    a card number and an unknown license, in two sources; returns it and the planted secrets."""
    rng = random.Random(5)
    github, stripe = secret_sample("github_token", rng), secret_sample("stripe_key", rng)
    rows = {
        "chat": [
            {"id": "c1", "text": f"deploy notes\n{github.text}", "user": "u1"},
            {"id": "c2", "text": "my card is 4111 1111 1111 1111 thanks", "user": "u2"},
            {"id": "c3", "text": "a clean message", "user": "u3"},
        ],
        "mail": [
            {"id": "m1", "text": "config attached", "user": "u4", "note": stripe.text},
            {"id": "m2", "text": "terms?", "user": "u5", "license": "LicenseRef-mystery"},
        ],
    }
    catalog, queued = queue_for_review(root, rows)
    assert queued == 4
    return catalog, {"github_token": github.value, "stripe_key": stripe.value}


class Clock:
    def __init__(self):
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def queue(tmp_path):
    return queued_catalog(tmp_path)


@pytest.fixture
def tokens() -> dict[str, str]:
    return {"ana": secrets.token_urlsafe(32), "shared": secrets.token_urlsafe(32)}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def client(queue, tokens, clock) -> TestClient:
    review = ReviewConfig(
        reviewers={"ana": f"sha256:{hashlib.sha256(tokens['ana'].encode()).hexdigest()}"},
        session_minutes=30,
    )
    return TestClient(create_app(queue[0], review, shared_token=tokens["shared"], clock=clock))


def ids_by(catalog: Catalog, **where) -> list[int]:
    return [entry["id"] for entry in review_queue.items(catalog, **where)]


def form_token(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def login(client: TestClient, name: str, token: str, next: str = "/"):
    page = client.get("/login")
    data = {"csrf": form_token(page.text), "name": name, "token": token, "next": next}
    return client.post("/login", data=data, follow_redirects=False)


def decide(client: TestClient, item_id: int, decision: str, note: str, **headers):
    token = form_token(client.get("/").text)  # the log-out form carries it on every page
    data = {"csrf": token, "decision": decision, "note": note}
    return client.post(f"/items/{item_id}/decision", data=data, headers=headers)


def listed(html: str) -> list[int]:
    return [int(found) for found in re.findall(r'class="item-link" href="/items/(\d+)"', html)]


def test_every_page_but_login_and_healthz_needs_a_session(client, queue):
    catalog, _ = queue
    assert client.get("/healthz").text == "ok"
    for path in ("/", "/items/1", "/?status=all"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/login?next=%2F")
    assert "Log in to review" in client.get("/").text
    refused = client.post("/items/1/decision", data={"decision": "approved", "note": "x"})
    assert refused.status_code == 403
    assert review_queue.item(catalog, 1)["status"] == "pending"
    assert client.get("/login").headers["cache-control"] == "no-store"


def test_a_wrong_token_is_refused(client, tokens):
    for name, token in (
        ("ana", tokens["ana"] + "x"),
        ("bo", tokens["ana"]),  # ana's token is only hers
        ("", tokens["shared"]),  # the shared token still needs a name
        ("ana", ""),
    ):
        response = login(client, name, token)
        assert response.status_code == 401
        assert SESSION_COOKIE not in response.cookies
    assert "Name or token not accepted." in response.text
    assert client.get("/", follow_redirects=False).status_code == 303


def test_forged_or_garbled_cookies_and_tokens_are_refused(client, queue, tokens):
    login(client, "ana", tokens["ana"])
    cookie = client.cookies[SESSION_COOKIE]
    encoded, expires, own, signature = cookie.split(".")
    assert own == "1"  # ana logged in with her own token
    forged = f"{encoded}.{int(expires) + 86400}.{own}.{signature}"  # longer, same signature
    shared = TestClient(client.app)
    login(shared, "bo", tokens["shared"])
    encoded_bo, expires_bo, own_bo, signature_bo = shared.cookies[SESSION_COOKIE].split(".")
    assert own_bo == "0"
    raised = f"{encoded_bo}.{expires_bo}.1.{signature_bo}"  # a shared log-in claiming its own
    stranger = TestClient(client.app)
    for value in (forged, raised, "bm9ib2R5.9999999999.0.ü", "garbage"):
        header = f"{SESSION_COOKIE}={value}".encode("latin-1")  # as a client may send it
        assert (
            stranger.get("/", headers={"cookie": header}, follow_redirects=False).status_code == 303
        )
    form = {"csrf": "ü" * 64, "decision": "approved", "note": "x"}
    assert client.post("/items/1/decision", data=form).status_code == 403
    assert login(TestClient(client.app), "ana", "ü").status_code == 401
    assert review_queue.item(queue[0], 1)["status"] == "pending"


def test_a_reviewer_token_and_the_shared_token_both_log_in(client, tokens):
    response = login(client, "ana", tokens["ana"], next="/items/2")
    assert (response.status_code, response.headers["location"]) == (303, "/items/2")
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "signed in as <strong>ana</strong>" in client.get("/").text
    other = TestClient(client.app)
    response = login(other, "bo", tokens["shared"], next="https://elsewhere.example/")
    assert (response.status_code, response.headers["location"]) == (303, "/")
    assert "signed in as <strong>bo</strong>" in other.get("/").text


def test_without_any_token_configured_the_login_page_says_so(queue):
    client = TestClient(create_app(queue[0], ReviewConfig(), shared_token=""))
    page = client.get("/login").text
    assert "Reviewing is disabled" in page and "thresher review token NAME" in page
    assert "$THRESHER_REVIEW_TOKEN" in page
    assert login(client, "ana", "anything").status_code == 401


def test_filters_list_the_matching_items_and_count_per_status(client, queue, tokens):
    catalog, _ = queue
    login(client, "ana", tokens["ana"])
    page = client.get("/").text
    assert listed(page) == ids_by(catalog) == [1, 2, 3, 4]
    options = re.findall(r'<option value="([^"]+)"', page)
    assert options == [
        *review_queue.STATUSES, "all",
        "license_unknown", "personal_data", "secret_detected",
        "chat", "mail",
    ]  # fmt: skip
    secret = client.get("/?reason=secret_detected").text
    assert listed(secret) == ids_by(catalog, reason="secret_detected") == [1, 3]
    assert listed(client.get("/?source=mail").text) == ids_by(catalog, source="mail") == [3, 4]
    both = client.get("/", params={"reason": "secret_detected", "source": "mail"}).text
    assert listed(both) == [3]
    assert '<option value="secret_detected" selected>' in secret
    decide(client, 1, "approved", "a test fixture")
    assert listed(client.get("/").text) == [2, 3, 4]  # pending by default
    approved = client.get("/?status=approved").text
    assert listed(approved) == [1]
    assert re.findall(r'id="count-(\w+)">(\d+)<', approved) == [
        ("pending", "3"), ("approved", "1"), ("rejected", "0"),
    ]  # fmt: skip
    in_mail = client.get("/?status=all&source=mail").text
    assert re.findall(r'id="count-(\w+)">(\d+)<', in_mail)[0] == ("pending", "2")
    assert "No items match these filters." in client.get("/?source=nowhere").text
    assert client.get("/?status=maybe").status_code == 400


def test_the_item_page_shows_masked_text_and_redacted_evidence_only(client, queue, tokens):
    catalog, planted = queue
    login(client, "ana", tokens["ana"])
    pages = {item_id: client.get(f"/items/{item_id}").text for item_id in ids_by(catalog)}
    everything = "\n".join(pages.values())
    for kind, value in planted.items():
        assert value not in everything and value[4:16] not in everything, kind
    github = pages[1]
    assert "git clone https://&lt;SECRET:github_token&gt;@github.com/o/r" in github
    assert "<SECRET:" not in everything  # escaped, never markup
    evidence = unescape(re.search(r'<pre id="evidence">(.*?)</pre>', github, re.S).group(1))
    assert json.loads(evidence) == json.loads(review_queue.item(catalog, 1)["evidence"])
    assert f'\n      "lead": "{planted["github_token"][:4]}"\n' in evidence  # pretty JSON
    assert '<dd id="group">u1</dd>' in github
    assert "&lt;CREDIT_CARD …1111&gt;" in pages[2]
    assert "stripe.api_key = &#39;&lt;SECRET:stripe_key&gt;&#39;" in pages[3]  # the metadata
    assert '"LicenseRef-mystery": "unknown"' in unescape(pages[4])
    assert all('id="approve"' in page and "No decision yet." in page for page in pages.values())
    assert client.get("/items/99").status_code == 404


def test_a_post_without_the_form_token_or_from_elsewhere_is_refused(client, queue, tokens):
    catalog, _ = queue
    login(client, "ana", tokens["ana"])
    form = {"decision": "approved", "note": "looks fine"}
    assert client.post("/items/1/decision", data=form).status_code == 403
    assert client.post("/items/1/decision", data={**form, "csrf": "0" * 64}).status_code == 403
    other = TestClient(client.app)
    login(other, "bo", tokens["shared"])
    stolen = form_token(other.get("/").text)  # valid, but for bo's session
    assert client.post("/items/1/decision", data={**form, "csrf": stolen}).status_code == 403
    foreign = decide(client, 1, "approved", "x", Origin="http://evil.example")
    assert foreign.status_code == 403 and "another site" in foreign.text
    by_referer = decide(client, 1, "approved", "x", Referer="http://evil.example/page")
    assert by_referer.status_code == 403
    spoofed_port = decide(client, 1, "approved", "x", Origin="http://testserver:9999")
    assert spoofed_port.status_code == 403
    assert review_queue.item(catalog, 1)["status"] == "pending"
    assert review_queue.history(catalog, 1) == []
    accepted = decide(client, 1, "approved", "x", Origin="http://testserver")
    assert accepted.status_code == 200 and review_queue.item(catalog, 1)["status"] == "approved"


def test_approve_and_reject_are_recorded_like_the_cli(client, queue, tokens):
    catalog, _ = queue
    login(client, "ana", tokens["ana"])
    approved = decide(client, 1, "approved", "a test fixture, not a live key")
    assert approved.url.path == "/items/1" and approved.url.params["flash"] == "approved"
    assert "Approved by ana" in approved.text and 'id="approve"' not in approved.text
    rejected = decide(client, 3, "rejected", "a live key; rotated")
    assert "Rejected by ana" in rejected.text
    entries = {entry["id"]: entry for entry in review_queue.items(catalog)}
    assert {k: (v["status"], v["reviewer"], v["note"]) for k, v in entries.items()} == {
        1: ("approved", "ana", "a test fixture, not a live key"),
        2: ("pending", None, None),
        3: ("rejected", "ana", "a live key; rotated"),
        4: ("pending", None, None),
    }
    for item_id in (1, 3):  # the audit log holds the same decision
        (row,) = review_queue.history(catalog, item_id)
        entry = entries[item_id]
        assert (row["decision"], row["reviewer"], row["note"], row["decided_at"]) == (
            entry["status"], entry["reviewer"], entry["note"], entry["decided_at"],
        )  # fmt: skip
    assert "a live key; rotated" in client.get("/items/3").text  # the history table
    assert "Approved by" not in client.get("/items/4?flash=approved").text  # a made-up link
    no_note = decide(client, 2, "rejected", "   ")
    assert "Write a note" in no_note.text and review_queue.item(catalog, 2)["status"] == "pending"


def test_any_id_that_is_not_an_item_is_a_404_and_a_form_not_in_utf8_is_refused(
    client, queue, tokens
):
    catalog, _ = queue
    login(client, "ana", tokens["ana"])
    for item_id in ("9" * 26, "9" * 5000, "0", "-1", "abc", "1e3", "%D9%A3", "99"):  # ٣: no ASCII
        page = client.get(f"/items/{item_id}")
        assert page.status_code == 404, item_id
        assert "There is no review item" in page.text
        assert decide(client, item_id, "approved", "fine").status_code == 404, item_id
    token = form_token(client.get("/").text)
    body = f"csrf={token}&decision=approved&note=%ff%fe"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    garbled = client.post("/items/1/decision", content=body, headers=headers)
    assert garbled.status_code == 400 and "not valid UTF-8" in garbled.text
    assert review_queue.item(catalog, 1)["status"] == "pending"
    assert review_queue.history(catalog, 1) == []


def queue_label_conflict(catalog, evidence: dict) -> int:
    """Queue one label-conflict item for the evidence's representative; return its id."""
    item = {
        "record_id": evidence["representative"], "source": "chat",
        "source_content_hash": "c" * 32, "review_hash": "d" * 32, "group_hash": None,
        "reason": "label_conflict", "evidence": json.dumps(evidence), "text": "win a prize",
        "metadata": None, "group": None, "label": "spam",
    }  # fmt: skip
    review_queue.enqueue(catalog, pl.DataFrame([item], schema=REVIEW_ITEM_SCHEMA), "ds", "r")
    (item_id,) = ids_by(catalog, reason="label_conflict")
    return item_id


def test_a_large_cluster_offers_every_label_and_says_how_many_are_listed(client, queue, tokens):
    """An item whose evidence lists the first members of a large cluster: the page says how
    many it shows, and offers a label that only unlisted members carry."""
    catalog, _ = queue
    members = [{"record_id": f"{n:032x}", "source": "chat", "label": "spam"} for n in range(2)]
    evidence = {
        "members": members, "representative": members[0]["record_id"], "method": "minhash",
        "members_total": 70, "labels": {"spam": 60, "ham": 9},
    }  # fmt: skip
    item_id = queue_label_conflict(catalog, evidence)
    login(client, "ana", tokens["ana"])
    page = client.get(f"/items/{item_id}").text
    assert re.findall(r'<option value="([^"]+)">', page) == ["ham", "spam"]
    assert "The first 2 of 70 members" in page
    entry = review_queue.item(catalog, item_id)
    assert review_queue.member_labels(entry) == "spam ×60 (chat), ham ×9, null ×1"


def test_a_label_conflict_is_approved_with_a_label(client, queue, tokens):
    catalog, _ = queue
    members = [
        {"record_id": "a" * 32, "source": "chat", "label": "spam"},
        {"record_id": "b" * 32, "source": "mail", "label": "ham"},
    ]
    evidence = {"members": members, "representative": "a" * 32, "method": "exact"}
    item_id = queue_label_conflict(catalog, evidence)
    login(client, "ana", tokens["ana"])
    page = client.get(f"/items/{item_id}").text
    assert re.findall(r'<option value="([^"]+)">', page) == ["ham", "spam"]
    assert 'id="members"' in page and "kept (this item)" in page and "mail" in page
    token = form_token(page)
    form = {"csrf": token, "decision": "approved", "note": "it is spam"}
    unlabelled = client.post(f"/items/{item_id}/decision", data=form)
    assert "Choose the label" in unlabelled.text
    assert review_queue.item(catalog, item_id)["status"] == "pending"
    approved = client.post(f"/items/{item_id}/decision", data={**form, "label": "spam"})
    assert approved.url.params["flash"] == "approved"
    assert 'id="adjudicated-label">spam<' in approved.text
    assert review_queue.item(catalog, item_id)["adjudicated_label"] == "spam"
    # a label field on a decision that takes none is ignored
    rejected = client.post("/items/1/decision", data={**form, "decision": "rejected", "label": "x"})
    assert rejected.url.params["flash"] == "rejected"
    assert review_queue.item(catalog, 1)["adjudicated_label"] is None


def test_a_second_decision_shows_the_conflict(client, queue, tokens):
    catalog, _ = queue
    login(client, "ana", tokens["ana"])
    decide(client, 2, "approved", "a documented test card number")
    other = TestClient(client.app)
    login(other, "bo", tokens["shared"])
    late = decide(other, 2, "rejected", "a real card")
    assert late.url.params["flash"] == "conflict"
    assert "Not decided: this item was already approved by ana at" in late.text
    assert [row["reviewer"] for row in review_queue.history(catalog, 2)] == ["ana"]
    assert review_queue.item(catalog, 2)["status"] == "approved"


def test_an_expired_session_is_refused(client, queue, tokens, clock):
    catalog, _ = queue
    login(client, "ana", tokens["ana"])
    page = client.get("/")
    clock.now += 29 * 60
    assert client.get("/", follow_redirects=False).status_code == 200
    clock.now += 60
    form = {"csrf": form_token(page.text), "decision": "approved", "note": "late"}
    assert client.post("/items/1/decision", data=form).status_code == 403
    assert review_queue.item(catalog, 1)["status"] == "pending"
    expired = client.get("/items/1", follow_redirects=False)
    assert expired.status_code == 303
    assert expired.headers["location"] == "/login?next=%2Fitems%2F1&msg=expired"
    assert "Your session expired" in client.get(expired.headers["location"]).text


def test_logging_out_ends_the_session(client, tokens):
    login(client, "ana", tokens["ana"])
    client.post("/logout", data={"csrf": form_token(client.get("/").text)})
    assert client.get("/", follow_redirects=False).status_code == 303


def test_an_approval_is_announced_when_a_prefect_server_is_set(client, queue, tokens, monkeypatch):
    catalog, _ = queue
    announced = []
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # never contacted
    monkeypatch.setattr(
        "flows.release.emit_approved", lambda dataset, ids: announced.append((dataset, ids)) or True
    )
    login(client, "ana", tokens["ana"])
    assert "release-approved flow was notified" in decide(client, 1, "approved", "ok").text
    decide(client, 3, "rejected", "live")
    assert announced == [("chatlogs", [1])]

    def unreachable(dataset, ids):
        raise ConnectionError("no Prefect server")

    monkeypatch.setattr("flows.release.emit_approved", unreachable)
    page = decide(client, 2, "approved", "test card").text
    assert "could not be announced" in page
    assert review_queue.item(catalog, 2)["status"] == "approved"


def test_review_token_prints_a_token_and_its_config_line(tmp_path):
    result = CliRunner().invoke(cli_app, ["review", "token", "ana"])
    assert result.exit_code == 0
    token = result.stdout.strip()
    assert len(token) == 43  # token_urlsafe(32)
    line = result.stderr.splitlines()[-1].strip()
    assert line == f"ana: sha256:{hashlib.sha256(token.encode()).hexdigest()}"
    config = write_project(tmp_path, [SMS_SOURCE], review={"reviewers": yaml.safe_load(line)})
    from pipeline.config import load_run_config

    review = load_run_config(config).review
    catalog = Catalog.open(tmp_path / "work")
    client = TestClient(create_app(catalog, review, shared_token=""))
    assert login(client, "ana", token).status_code == 303


def test_review_serve_runs_uvicorn_and_warns_beyond_loopback(tmp_path, monkeypatch):
    config = write_project(tmp_path, [SMS_SOURCE])
    Catalog.open(tmp_path / "work")
    served, apps = [], []
    monkeypatch.setattr(
        "uvicorn.run", lambda app, **options: (served.append(options), apps.append(app))
    )
    monkeypatch.delenv("THRESHER_REVIEW_TOKEN", raising=False)
    runner = CliRunner()
    local = runner.invoke(cli_app, ["review", "serve", "--workdir", str(tmp_path / "work")])
    assert local.exit_code == 0 and "beyond this machine" not in local.stderr
    assert "no reviewer token is configured" in local.stderr
    remote = runner.invoke(
        cli_app, ["review", "serve", "--host", "0.0.0.0", "--port", "9001", "--config", str(config)]
    )
    assert remote.exit_code == 0 and "warning: serving on 0.0.0.0" in remote.stderr
    assert served == [
        {"host": "127.0.0.1", "port": 8765, "log_level": "warning"},
        {"host": "0.0.0.0", "port": 9001, "log_level": "warning"},
    ]
    # on loopback, a page whose name was rebound to 127.0.0.1 gets no answer
    on_loopback, on_all = TestClient(apps[0]), TestClient(apps[1])
    assert on_loopback.get("http://127.0.0.1:8765/healthz").text == "ok"
    assert on_loopback.get("http://localhost:8765/healthz").text == "ok"
    assert on_loopback.get("http://rebound.example:8765/healthz").status_code == 400
    assert on_all.get("http://reviews.example/healthz").text == "ok"


def test_a_records_items_share_one_page_and_source_level_reasons_are_decided_in_bulk(
    tmp_path, tokens, clock
):
    secret = secret_sample("github_token", random.Random(9))
    terms = {"user": "u", "license": "LicenseRef-mystery"}
    rows = {
        "mail": [
            {**terms, "id": "m1", "text": f"terms?\n{secret.text}"},  # a license and a secret
            {**terms, "id": "m2", "text": "other terms?"},
            {**terms, "id": "m3", "text": "more terms"},
        ]
    }
    catalog, queued = queue_for_review(tmp_path, rows)
    assert queued == 4
    review = ReviewConfig(session_minutes=30)
    client = TestClient(create_app(catalog, review, shared_token=tokens["shared"], clock=clock))
    assert login(client, "ana", tokens["shared"]).status_code == 303
    license_items = ids_by(catalog, reason="license_unknown")
    (secret_item,) = ids_by(catalog, reason="secret_detected")
    first = review_queue.item(catalog, secret_item)
    license_of_m1 = next(
        i for i in license_items if review_queue.item(catalog, i)["record_id"] == first["record_id"]
    )

    page = client.get(f"/items/{license_of_m1}").text
    # both reasons of the record, linked; the config setting that settles the license for
    # the whole source; the evidence as a list; the next pending item
    assert re.findall(r'<table id="record-items">.*?</table>', page, re.S)
    assert f'href="/items/{secret_item}"' in page and "secret_detected" in page
    hint = unescape(re.search(r'id="source-setting">(.*?)</p>', page, re.S).group(1))
    assert "policy.licenses.classes" in hint and '"LicenseRef-mystery"' in hint and "mail" in hint
    assert re.search(r'<dl id="evidence-list"><dt>licenses</dt><dd><span class="pre">'
                     r"LicenseRef-mystery=unknown</span></dd>", page)  # fmt: skip
    assert re.search(r'id="next-pending">Next pending item \((\d+)\)', page)
    assert '<dd id="license">LicenseRef-mystery</dd>' in page

    token = form_token(page)
    data = {"csrf": token, "decision": "approved", "note": "terms checked", "scope": "record"}
    decided = client.post(f"/items/{license_of_m1}/decision", data=data)
    assert "Decided every pending item of this record: 2 approved by ana" in unescape(decided.text)
    for item_id in (license_of_m1, secret_item):
        assert [row["note"] for row in review_queue.history(catalog, item_id)] == ["terms checked"]

    listing = client.get("/?status=pending&source=mail&reason=license_unknown").text
    assert "Approve all 2" in listing and "policy.licenses.classes" in unescape(listing)
    seen = re.search(r'name="seen" value="(\d+)"', listing).group(1)
    bulk = {"csrf": form_token(listing), "source": "mail", "reason": "license_unknown",
            "decision": "rejected", "note": "not our terms", "seen": seen}  # fmt: skip
    done = client.post("/bulk", data=bulk)
    assert "2 item(s) decided with your note; 0 were already decided." in unescape(done.text)
    remaining = [i for i in license_items if i != license_of_m1]
    for item_id in remaining:
        [row] = review_queue.history(catalog, item_id)  # one decision-log row per item
        assert (row["decision"], row["reviewer"], row["note"]) == (
            "rejected",
            "ana",
            "not our terms",
        )
    assert ids_by(catalog, status="pending") == []
    page = client.get(f"/items/{license_of_m1}").text
    assert 'id="no-next"' in page
    # counts in a link this server did not sign are not shown
    forged = client.get("/?flash=bulk_decided&n=1000.0&sig=0").text
    assert "decided with your note" not in forged
    # a bulk decision needs a source and a reason, and a note
    refused = client.post("/bulk", data={**bulk, "source": ""})
    assert "Choose a source and a reason first" in unescape(refused.text)


def test_personal_data_is_masked_by_the_policy_and_revealed_only_with_the_permission(
    tmp_path, tokens, clock
):
    secret = secret_sample("github_token", random.Random(11))
    phone, email = "+1 415-555-0134", "ana.perez@example.org"
    rows = {"chat": [{"id": "c1", "user": "u1", "text": f"call {phone} or {email}\n{secret.text}"}]}
    catalog, queued = queue_for_review(tmp_path, rows)
    assert queued == 1
    (item_id,) = ids_by(catalog)
    stored = review_queue.item(catalog, item_id)
    assert phone in stored["text"]  # stored raw: the review hash, and past decisions, hold
    lead_token = secrets.token_urlsafe(32)
    review = ReviewConfig(
        session_minutes=30,
        reviewers={"lead": f"sha256:{hashlib.sha256(lead_token.encode()).hexdigest()}"},
        reveal=["lead"],
    )
    policy = PolicyConfig(personal_data={"email": "keep"})  # phones redacted, e-mails kept
    client = TestClient(
        create_app(catalog, review, shared_token=tokens["shared"], clock=clock, policy=policy)
    )
    assert login(client, "ana", tokens["shared"]).status_code == 303
    page = client.get(f"/items/{item_id}").text
    text = unescape(re.search(r'<pre id="text">(.*?)</pre>', page, re.S).group(1))
    assert text.startswith(f"call <PHONE> or {email}\n") and "<SECRET:github_token>" in text
    assert phone not in unescape(page) and 'id="reveal"' not in page
    listing = unescape(client.get("/").text)
    assert "<PHONE>" in listing and phone not in listing
    refused = client.post(f"/items/{item_id}/reveal", data={"csrf": form_token(page)})
    assert refused.status_code == 403 and review_queue.reveals(catalog, item_id) == []

    def app():
        return create_app(
            catalog, review, shared_token=tokens["shared"], clock=clock, policy=policy
        )

    # the shared token logs in under any name, "lead" too: it never carries the permission
    posing = TestClient(app())
    assert login(posing, "lead", tokens["shared"]).status_code == 303
    page = posing.get(f"/items/{item_id}").text
    assert 'id="reveal"' not in page
    refused = posing.post(f"/items/{item_id}/reveal", data={"csrf": form_token(page)})
    assert refused.status_code == 403 and "your own token" in unescape(refused.text)

    lead = TestClient(app())
    assert login(lead, "lead", lead_token).status_code == 303
    page = lead.get(f"/items/{item_id}").text
    assert 'id="reveal"' in page
    shown = lead.post(f"/items/{item_id}/reveal", data={"csrf": form_token(page)}).text
    text = unescape(re.search(r'<pre id="text">(.*?)</pre>', shown, re.S).group(1))
    assert text.startswith(f"call {phone} or {email}\n")  # revealed; the secret stays masked
    assert secret.value not in shown
    [logged] = review_queue.reveals(catalog, item_id)
    assert logged["reviewer"] == "lead"
    assert "Revealed 1 time(s): lead at" in unescape(lead.get(f"/items/{item_id}").text)
    assert review_queue.item(catalog, item_id)["review_hash"] == stored["review_hash"]
