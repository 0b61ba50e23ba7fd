"""Fault suite, the reviewer page and the terminal: a huge or endless form body is refused
after reading little, a request with both a Content-Length and a Transfer-Encoding is refused
(no request smuggled in behind it), a note with a control or bidi character is refused on the
page and on the command line, and the commands that print record text, labels, notes, field
names or secret leads print every control and bidi character as a visible escape."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from datetime import UTC, datetime

import polars as pl
import pytest
import uvicorn
import yaml
from fastapi.testclient import TestClient
from helpers import write_jsonl
from sqlalchemy import insert
from typer.testing import CliRunner

from data_catalog import review_queue, tables
from data_catalog.catalog import Catalog
from flows.cli import app as cli_app
from flows.review_server import MAX_FORM_BYTES, SESSION_COOKIE, create_app
from pipeline.config import ReviewConfig
from pipeline.core.errors import DataError
from pipeline.core.schema import REVIEW_ITEM_SCHEMA
from pipeline.core.terminal import printable, unsafe_char

HOSTILE = "\x1b]0;title\x07\x1b[2J\u202e"  # sets the window title, clears the screen, reverses
SHOWN = "\\x1b]0;title\\x07\\x1b[2J\\u202e"  # how it is printed
RAW = ("\x1b", "\x07", "\u202e")
# every character a note may not hold: C0 but tab and new line, DEL, C1, the bidi controls
REFUSED = (
    [chr(c) for c in range(0x20) if chr(c) not in "\t\n"]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + list("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
)
runner = CliRunner()
WIDE = {"COLUMNS": "400"}


def assert_no_raw(*outputs: str) -> None:
    for output in outputs:
        assert not any(char in output for char in RAW), repr(output)


# --- the shared helper ----------------------------------------------------------------------


def test_printable_escapes_controls_and_bidi_and_keeps_the_rest():
    assert printable(f"a{HOSTILE}b") == f"a{SHOWN}b"
    assert printable("x\x00\x7f\x85\u2066\u061cy") == "x\\x00\\x7f\\x85\\u2066\\u061cy"
    assert printable("tab\tline\nend") == "tab\\x09line\\x0aend"
    assert printable("tab\tline\nend\r", multiline=True) == "tab\tline\nend\\x0d"
    assert printable("Grüße, 中文, émoji 🙂 [bold]") == "Grüße, 中文, émoji 🙂 [bold]"
    assert unsafe_char("fine\n\ttext") is None
    assert unsafe_char("ab\u202ec") == (2, "U+202E")
    for char in REFUSED:
        assert unsafe_char(f"a{char}") == (1, f"U+{ord(char):04X}")
        assert printable(char, multiline=True) != char


def test_a_note_with_a_control_or_bidi_character_is_refused_by_the_queue():
    review_queue.checked_note("two lines\n\tand a tab")
    review_queue.checked_note(None)
    for char in REFUSED:
        with pytest.raises(DataError, match=f"U\\+{ord(char):04X} at character 4"):
            review_queue.checked_note(f"ok {char} then")


# --- the page: notes ------------------------------------------------------------------------


def enqueue(catalog: Catalog, **values) -> int:
    """Queue one item (a secret finding unless `reason` says otherwise); return its id."""
    item = {
        "record_id": "a" * 32, "source": "chat", "source_content_hash": "b" * 32,
        "review_hash": "c" * 32, "group_hash": None, "reason": "secret_found",
        "evidence": json.dumps({"type": "github_token"}), "text": "some text",
        "metadata": None, "group": None, "label": None, **values,
    }  # fmt: skip
    review_queue.enqueue(catalog, pl.DataFrame([item], schema=REVIEW_ITEM_SCHEMA), "ds", "r")
    return review_queue.items(catalog)[-1]["id"]


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    catalog = Catalog.open(tmp_path / "work")
    enqueue(catalog)
    return catalog


@pytest.fixture
def review_app(catalog):
    return create_app(catalog, ReviewConfig(), shared_token="s3cret")


def logged_in(app) -> TestClient:
    client = TestClient(app)
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    data = {"csrf": csrf, "name": "ana", "token": "s3cret", "next": "/"}
    assert client.post("/login", data=data, follow_redirects=False).status_code == 303
    return client


def test_the_page_refuses_a_note_with_a_control_or_bidi_character(review_app, catalog):
    client = logged_in(review_app)
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/").text).group(1)
    for char in REFUSED:
        form = {"csrf": csrf, "decision": "approved", "note": f"ok {char} then"}
        refused = client.post("/items/1/decision", data=form, follow_redirects=False)
        assert refused.status_code == 400, repr(char)
        assert f"U+{ord(char):04X} at character 4" in refused.text
        assert "type the note again as plain text" in refused.text
    bulk = {"csrf": csrf, "decision": "approved", "note": "ok \u202e", "seen": "1"}
    bulk |= {"source": "chat", "reason": "secret_found"}
    refused = client.post("/bulk", data=bulk, follow_redirects=False)
    assert refused.status_code == 400 and "U+202E" in refused.text
    assert review_queue.item(catalog, 1)["status"] == "pending"
    assert review_queue.history(catalog, 1) == []
    form = {"csrf": csrf, "decision": "approved", "note": "two lines\n\twith a tab"}
    assert client.post("/items/1/decision", data=form, follow_redirects=False).status_code == 303
    assert review_queue.item(catalog, 1)["note"] == "two lines\n\twith a tab"


def test_the_cli_refuses_a_note_with_a_control_or_bidi_character(catalog):
    workdir = catalog.workdir
    for char in ("\x00", "\x1b", "\x9b", "\u202e", "\u2066"):
        result = runner.invoke(
            cli_app, ["review", "approve", "1", "--reviewer", "ana", "--note", f"ok {char}",
                      "-w", str(workdir)],
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        assert f"U+{ord(char):04X} at character 4" in result.stderr
    assert review_queue.item(catalog, 1)["status"] == "pending"


# --- the page: body size and framing, against a real uvicorn ---------------------------------


class CountingReceive:
    """Counts the body bytes the app reads (the measure of what a hostile body cost)."""

    def __init__(self, app):
        self.app, self.read = app, 0

    async def __call__(self, scope, receive, send):
        async def counted():
            message = await receive()
            self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counted, send)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(port, counter, session cookie): the page on a real uvicorn on 127.0.0.1, one for the
    module (no test here changes the catalog: each request is refused)."""
    catalog = Catalog.open(tmp_path_factory.mktemp("served") / "work")
    enqueue(catalog)
    review_app = create_app(catalog, ReviewConfig(), shared_token="s3cret")
    counter = CountingReceive(review_app)
    config = uvicorn.Config(counter, host="127.0.0.1", port=0, log_level="error")
    config.timeout_keep_alive = 1
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    cookie = review_app.state.sessions.issue("ana")
    yield port, counter, cookie
    server.should_exit = True
    thread.join(10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def head(path: str, cookie: str, *framing: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Cookie: {SESSION_COOKIE}={cookie}"]
    lines += ["Content-Type: application/x-www-form-urlencoded", *framing]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:  # closed with some of our body unread: the answer came first
        pass
    return received


BODY_ROUTES = ["/login", "/logout", "/items/1/decision", "/items/1/reveal", "/bulk"]


@pytest.mark.services
@pytest.mark.parametrize("path", BODY_ROUTES)
def test_a_huge_content_length_is_refused_before_the_body_is_read(served, path):
    port, counter, cookie = served
    counter.read = 0
    with connect(port) as sock:
        sock.sendall(head(path, cookie, f"Content-Length: {300 * 1024 * 1024}"))
        sock.sendall(b"note=" + b"x" * 4096)  # a few KB of the announced 300 MB
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"The form is too large." in answer
    assert counter.read == 0


@pytest.mark.services
@pytest.mark.parametrize("path", BODY_ROUTES)
def test_a_chunked_body_over_the_limit_is_refused_after_reading_little(served, path):
    port, counter, cookie = served
    counter.read = 0
    chunk = b"x" * 16384
    with connect(port) as sock:
        sock.sendall(head(path, cookie, "Transfer-Encoding: chunked"))
        sent = 0
        try:  # never ends the body: only a refusal can answer
            while sent < 4 * 1024 * 1024:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                time.sleep(0.002)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed the connection
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 413 ")
    # what the app read: past the limit by at most what uvicorn had buffered (flow control
    # pauses it at 64 KiB), never the 4 MiB sent
    assert MAX_FORM_BYTES < counter.read < 4 * MAX_FORM_BYTES


@pytest.mark.services
def test_a_request_with_both_a_length_and_chunks_is_refused_and_nothing_is_smuggled(served):
    port, counter, cookie = served
    counter.read = 0
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with connect(port) as sock:
        sock.sendall(head("/login", cookie, "Content-Length: 5", "Transfer-Encoding: chunked"))
        sock.sendall(b"0\r\n\r\n" + smuggled)
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert answer.count(b"HTTP/1.1 ") == 1  # one answer, then the connection closed
    assert b"not both" in answer and b"\r\n\r\nok" not in answer
    assert counter.read == 0
    with connect(port) as sock:  # the server still answers a plain request
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert read_all(sock).startswith(b"HTTP/1.1 200 ")


# --- the terminal ---------------------------------------------------------------------------


def test_review_show_escapes_record_text_group_label_and_notes(catalog):
    item_id = enqueue(
        catalog,
        record_id="d" * 32,
        text=f"line one [bold]not bold[/]\n{HOSTILE} text",
        group=f"g{HOSTILE}",
        label=f"[red]spam{HOSTILE}",
        metadata=json.dumps({"note": HOSTILE}),
        evidence=json.dumps({"license": f"[bold]{HOSTILE}"}),
    )
    with catalog.engine.begin() as connection:  # a note stored before notes were checked
        connection.execute(
            insert(tables.review_decisions).values(
                item_id=item_id, decision="rejected", reviewer=f"bo{HOSTILE}",
                note=f"old note {HOSTILE}", decided_at=datetime(2025, 1, 2, tzinfo=UTC),
            )
        )  # fmt: skip
    shown = runner.invoke(  # wide: no line is wrapped
        cli_app, ["review", "show", str(item_id), "-w", str(catalog.workdir)], env=WIDE
    )
    assert shown.exit_code == 0, shown.output
    assert_no_raw(shown.stdout, shown.stderr)
    out = shown.stdout
    assert "line one [bold]not bold[/]\n" in out  # markup is text; the text keeps its lines
    assert f"{SHOWN} text" in out
    assert f"g{SHOWN}" in out and f"[red]spam{SHOWN}" in out
    assert f"bo{SHOWN}: old note {SHOWN}" in out
    assert "[pending]" in out
    as_json = runner.invoke(
        cli_app, ["review", "show", str(item_id), "-w", str(catalog.workdir), "--json"]
    )
    assert_no_raw(as_json.stdout)
    decoded = json.loads(as_json.stdout)
    assert decoded["group"] == f"g{HOSTILE}"
    assert decoded["history"][0]["note"] == f"old note {HOSTILE}"


def test_review_show_escapes_a_label_conflicts_members_and_labels(catalog):
    evidence = {
        "method": "exact", "representative": "e" * 32, "members_total": 2,
        "members": [
            {"record_id": "e" * 32, "source": "chat", "label": f"[bold]ham{HOSTILE}"},
            {"record_id": "f" * 32, "source": "chat", "label": "spam"},
        ],
    }  # fmt: skip
    item_id = enqueue(
        catalog, record_id="e" * 32, reason="label_conflict", evidence=json.dumps(evidence)
    )
    review_queue.record_label(catalog, item_id, "ana", f"mine{HOSTILE}")
    shown = runner.invoke(cli_app, ["review", "show", str(item_id), "-w", str(catalog.workdir)])
    assert shown.exit_code == 0, shown.output
    assert_no_raw(shown.stdout, shown.stderr)
    assert f"[bold]ham{SHOWN}" in shown.stdout and f"labelled mine{SHOWN}" in shown.stdout


def hostile_csv(path):
    """A csv whose header names a field with the hostile text and lacks a `text` field."""
    path.write_text(f"id,{HOSTILE}body\n1,hello there\n", encoding="utf-8")
    return path


def test_dedup_escapes_field_names_and_file_names(tmp_path):
    refused = runner.invoke(cli_app, ["dedup", str(hostile_csv(tmp_path / "t.csv")),
                                      "-o", str(tmp_path / "out")])  # fmt: skip
    assert refused.exit_code == 2
    assert_no_raw(refused.stdout, refused.stderr)
    assert f"fields: id, {SHOWN}body" in refused.stderr
    named = write_jsonl(tmp_path / f"a{HOSTILE}.jsonl", [{"text": "hello"}, {"text": "hello"}])
    with named.open("a") as rows:
        rows.write("not json\n")
    result = runner.invoke(cli_app, ["dedup", str(named), "-o", str(tmp_path / "o2"), "--json"])
    assert result.exit_code == 2  # the bad line
    assert_no_raw(result.stdout, result.stderr)
    assert f"a{SHOWN}.jsonl: line 3: invalid_json" in result.stderr
    assert json.loads(result.stdout)["input"] == str(named)  # JSON escapes it itself


def test_secrets_scan_escapes_leads_file_names_and_field_names(tmp_path):
    secret = "password = " + f'"{HOSTILE}' + "Kq8vR2xLm9Zt4Wp" + '"'  # joined: no literal secret
    rows = write_jsonl(tmp_path / f"r{HOSTILE}.jsonl", [{"text": secret}])
    found = runner.invoke(cli_app, ["secrets", "scan", str(rows), str(rows)], env=WIDE)
    assert found.exit_code == 1, found.output
    assert_no_raw(found.stdout, found.stderr)
    assert f"r{SHOWN}.jsonl" in found.stdout  # each row names its file
    assert "\\x1b]0;…" in found.stdout  # the lead, escaped
    as_json = runner.invoke(cli_app, ["secrets", "scan", str(rows), str(rows), "--json"])
    assert_no_raw(as_json.stdout, as_json.stderr)
    assert json.loads(as_json.stdout.splitlines()[0])["path"] == str(rows)
    refused = runner.invoke(cli_app, ["secrets", "scan", str(hostile_csv(tmp_path / "t.csv"))])
    assert refused.exit_code == 2
    assert_no_raw(refused.stdout, refused.stderr)
    assert f"fields: id, {SHOWN}body" in refused.stderr


def test_quality_explain_escapes_field_names(tmp_path):
    hostile_csv(tmp_path / "t.csv")
    source = {"name": "t", "location": "t.csv", "format": "csv", "fields": {"text": "text"}}
    source |= {"license": "CC0-1.0", "consent": "contract", "owner": "tests"}
    config = tmp_path / "thresher.yaml"
    config.write_text(yaml.safe_dump({"name": "t", "workdir": "./work", "sources": [source]}))
    refused = runner.invoke(cli_app, ["quality", "explain", "--config", str(config)])
    assert refused.exit_code == 2
    assert_no_raw(refused.stdout, refused.stderr)
    assert f"(it has: id, {SHOWN}body)" in refused.stderr
