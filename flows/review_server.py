"""The reviewer web page (`thresher review serve`): the quarantine queue in a browser, one item
at a time, and approve / reject with a note. Decisions go through `review_queue.decide`, the
same audit log as `thresher review approve | reject`.

Every page but /login and /healthz needs a reviewer session: masked text is still personal
data. A session is a cookie holding the reviewer's name and expiry, signed with a key made at
start-up (restarting the server logs everyone out). Every form posts a token derived from the
cookie it rides with, and a POST from another origin is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode, urlsplit

import polars as pl
from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader
from sqlalchemy import func, select

from data_catalog import review_queue, tables
from data_catalog.catalog import Catalog
from pipeline.config import PolicyConfig, ReviewConfig
from pipeline.core.errors import DataError
from pipeline.text.personal_data import find_personal_data, redact_personal_data

TOKEN_ENV = "THRESHER_REVIEW_TOKEN"
SESSION_COOKIE = "thresher_review_session"
LOGIN_COOKIE = "thresher_review_login"  # binds the login form's token before there is a session
TEMPLATES = Path(__file__).parent / "templates" / "review"
QUEUE_ROWS = 500  # rows shown on the queue page; filters narrow a longer queue
MAX_FORM_BYTES = 64 * 1024
MAX_NOTE_CHARS = 4000
MAX_NAME_CHARS = 100
MAX_LABEL_CHARS = 200

logger = logging.getLogger("thresher.review")

# Pages carry personal data: never cached, never framed, no scripts, forms post only here.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# Flash messages travel as codes, so that a crafted link cannot put words on the page.
FLASHES = {
    "approved": ("ok", "Approved by {reviewer}: the next run lets this record through."),
    "approved_announced": (
        "ok",
        "Approved by {reviewer}: the release-approved flow was notified and publishes it.",
    ),
    "approved_not_announced": (
        "error",
        "Approved by {reviewer}, but the approval could not be announced to the Prefect server "
        "(see the server's log); the release-approved schedule picks it up later.",
    ),
    "rejected": ("ok", "Rejected by {reviewer}: every later run drops this content."),
    "conflict": (
        "error",
        "Not decided: this item was already {status} by {reviewer} at {decided_at} UTC; "
        "nothing changed.",
    ),
    "note_missing": ("error", "Write a note: it is recorded with the decision."),
    "note_too_long": ("error", f"A note has at most {MAX_NOTE_CHARS} characters."),
    "label_missing": ("error", "Choose the label the kept record is published with."),
    "label_too_long": ("error", f"A label has at most {MAX_LABEL_CHARS} characters."),
    "record_decided": (
        "ok",
        "Decided every pending item of this record: {n} {status} by {reviewer}.",
    ),
}
# After a bulk decision, on the queue page (`n`: items decided, `m`: already decided).
BULK_FLASHES = {
    "bulk_decided": ("ok", "{n} item(s) decided with your note; {m} were already decided."),
    "bulk_note_missing": ("error", "Write a note: it is recorded with every decision."),
    "bulk_needs_filter": (
        "error",
        "Choose a source and a reason first: a bulk decision covers "
        "the pending items of one source and one reason.",
    ),
}
LOGIN_MESSAGES = {
    "expired": "Your session expired or is no longer valid; log in again.",
    "logged_out": "You are logged out.",
}


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class NotLoggedIn(Exception):
    def __init__(self, had_session: bool):
        self.had_session = had_session


class Sessions:
    """Session cookies (`name.expiry.signature`) and the form tokens derived from them."""

    def __init__(self, minutes: int, clock: Callable[[], float]):
        self.seconds, self.clock = minutes * 60, clock
        self.key = secrets.token_bytes(32)

    def sign(self, purpose: str, value: str) -> str:
        return hmac.new(self.key, f"{purpose}\0{value}".encode(), hashlib.sha256).hexdigest()

    def issue(self, name: str, own_token: bool = False) -> str:
        """A cookie for `name`; `own_token`: they logged in with their own token, not the
        shared one (which any name may use)."""
        encoded = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
        body = f"{encoded}.{int(self.clock()) + self.seconds}.{int(own_token)}"
        return f"{body}.{self.sign('session', body)}"

    def _body(self, cookie: str | None) -> tuple[str, str] | None:
        """(name, own-token flag) of a valid, unexpired cookie; None otherwise."""
        body, _, signature = (cookie or "").rpartition(".")
        if not body or not _same(signature, self.sign("session", body)):
            return None
        encoded, _, rest = body.partition(".")
        expires, _, own = rest.partition(".")
        if not expires.isdigit() or int(expires) <= self.clock():
            return None
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode(), own

    def reviewer(self, cookie: str | None) -> str | None:
        """The name in a valid, unexpired cookie; None otherwise."""
        found = self._body(cookie)
        return found[0] if found else None

    def own_token(self, cookie: str | None) -> bool:
        """Whether the cookie's reviewer logged in with their own token."""
        found = self._body(cookie)
        return found is not None and found[1] == "1"

    def form_token(self, cookie: str) -> str:
        return self.sign("form", cookie)

    def check_form_token(self, cookie: str | None, token: str | None) -> None:
        if not cookie or not token or not _same(token, self.form_token(cookie)):
            raise Refused(403, "This form is stale or did not come from this page; reload it.")


class Tokens:
    """Which (name, token) pairs may log in: a configured reviewer's own token, or the shared
    token of $THRESHER_REVIEW_TOKEN under any name."""

    def __init__(self, review: ReviewConfig, shared: str | None):
        self.reviewers, self.shared = review.reviewers, shared or None

    @property
    def configured(self) -> bool:
        return bool(self.reviewers or self.shared)

    def accept(self, name: str, token: str) -> str | None:
        """ "own" (the name's own token), "shared" (the shared token), or None (refused)."""
        if not name or not token:
            return None
        given = token.encode()
        expected = self.reviewers.get(name)
        own = expected is not None and hmac.compare_digest(
            f"sha256:{hashlib.sha256(given).hexdigest()}", expected
        )
        shared = self.shared is not None and hmac.compare_digest(given, self.shared.encode())
        return "own" if own else "shared" if shared else None


def _same(given: str, expected: str) -> bool:
    # compare_digest refuses str with non-ASCII characters, which a client may send
    return hmac.compare_digest(given.encode(), expected.encode())


class OneBodyLength:
    """Refuses (400, and closes the connection) a request that gives both a Content-Length and
    a Transfer-Encoding: a proxy in front may frame its body by the one and this server by the
    other, and what one of them takes for the body's end is the start of a request smuggled in
    (RFC 9112, 6.3). uvicorn frames it by the Transfer-Encoding and passes both headers on."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        names = {name.lower() for name, _ in scope.get("headers", ())}
        if scope["type"] == "http" and {b"content-length", b"transfer-encoding"} <= names:
            refusal = PlainTextResponse(
                "A request may give a Content-Length or a Transfer-Encoding, not both.",
                status_code=400,
                headers={**SECURITY_HEADERS, "Connection": "close"},
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def current_reviewer(request: Request) -> str:
    """The logged-in reviewer's name (a FastAPI dependency)."""
    name = request.app.state.sessions.reviewer(request.cookies.get(SESSION_COOKIE))
    if name is None:
        raise NotLoggedIn(had_session=SESSION_COOKIE in request.cookies)
    return name


Reviewer = Annotated[str, Depends(current_reviewer)]
LOGGED_IN = [Depends(current_reviewer)]


def create_app(
    catalog: Catalog,
    review: ReviewConfig,
    *,
    shared_token: str | None = None,
    clock: Callable[[], float] = time.time,
    allowed_hosts: list[str] | None = None,
    policy: PolicyConfig | None = None,
) -> FastAPI:
    """The reviewer web app over `catalog`. The shared token defaults to $THRESHER_REVIEW_TOKEN;
    `clock` (seconds) decides session expiry; `allowed_hosts`, when given, are the only Host
    headers answered (a page on another site that rebinds its name to this address is not).
    Text is shown with the personal data `policy` does not keep masked as the shards mask it
    (`<PHONE>`); a reviewer named in `review.reveal` may reveal it, and each reveal is logged.
    The stored values, and so the review hash decisions match on, stay raw."""
    policy = policy or PolicyConfig()
    tokens = Tokens(review, shared_token if shared_token is not None else os.environ.get(TOKEN_ENV))
    sessions = Sessions(review.session_minutes, clock)
    pages = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.sessions = sessions
    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    app.add_middleware(OneBodyLength)  # added last: runs first

    def render(template: str, request: Request, code: int = 200, **values: Any) -> HTMLResponse:
        cookie = request.cookies.get(SESSION_COOKIE)
        reviewer = sessions.reviewer(cookie)
        csrf = sessions.form_token(cookie) if reviewer else ""
        html = pages.get_template(template).render(reviewer=reviewer, csrf=csrf, **values)
        return HTMLResponse(html, status_code=code)

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.exception_handler(NotLoggedIn)
    async def to_login(request: Request, error: NotLoggedIn) -> Response:
        if request.method == "GET":
            query = {
                "next": request.url.path + (f"?{request.url.query}" if request.url.query else "")
            }
            if error.had_session:
                query["msg"] = "expired"
            response = RedirectResponse(f"/login?{urlencode(query)}", status_code=303)
            if error.had_session:
                response.delete_cookie(SESSION_COOKIE, path="/")
            return response
        return render("error.html", request, 403, message=LOGIN_MESSAGES["expired"])

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused) -> Response:
        response = render("error.html", request, error.status, message=error.message)
        if error.status == 413:  # the rest of the body is not read: end the connection
            response.headers["Connection"] = "close"
        return response

    @app.get("/healthz", response_class=PlainTextResponse)
    def healthz() -> str:
        return "ok"

    def login_page(request: Request, code: int = 200, error: str | None = None, **values):
        nonce = request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(16)
        response = render(
            "login.html",
            request,
            code,
            login_csrf=sessions.form_token(nonce),
            enabled=tokens.configured,
            token_env=TOKEN_ENV,
            error=error,
            **values,
        )
        response.set_cookie(LOGIN_COOKIE, nonce, httponly=True, samesite="strict", path="/")
        return response

    @app.get("/login")
    def login_form(request: Request, next: str = "/", msg: str = "") -> Response:
        if sessions.reviewer(request.cookies.get(SESSION_COOKIE)):
            return RedirectResponse(_local(next), status_code=303)
        return login_page(request, next=_local(next), message=LOGIN_MESSAGES.get(msg), name="")

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await _form(request)
        sessions.check_form_token(request.cookies.get(LOGIN_COOKIE), form.get("csrf"))
        name, token = form.get("name", "").strip(), form.get("token", "")
        target = _local(form.get("next", "/"))
        accepted = tokens.accept(name, token) if len(name) <= MAX_NAME_CHARS else None
        if accepted is None:
            return login_page(
                request, 401, error="Name or token not accepted.", next=target, name=name
            )
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            sessions.issue(name, own_token=accepted == "own"),
            max_age=review.session_minutes * 60,
            httponly=True,
            samesite="strict",
            path="/",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/")
        return response

    @app.post("/logout", dependencies=LOGGED_IN)
    async def logout(request: Request) -> Response:
        form = await _form(request)
        sessions.check_form_token(request.cookies.get(SESSION_COOKIE), form.get("csrf"))
        response = RedirectResponse("/login?msg=logged_out", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.get("/", dependencies=LOGGED_IN)
    def queue(
        request: Request,
        status: str = "pending",
        reason: str = "",
        source: str = "",
        flash: str = "",
        n: str = "",
        sig: str = "",
    ) -> Response:
        if status not in (*review_queue.STATUSES, "all"):
            raise Refused(400, f"status must be one of {', '.join(review_queue.STATUSES)} or all")
        tally = _tally(catalog)
        in_filter = [
            row for row in tally if reason in ("", row["reason"]) and source in ("", row["source"])
        ]
        counts = {name: 0 for name in review_queue.STATUSES}
        for row in in_filter:
            counts[row["status"]] += row["n"]
        found = review_queue.items(
            catalog,
            status=None if status == "all" else status,
            reason=reason or None,
            source=source or None,
        )
        flash_kind, message = BULK_FLASHES.get(flash, (None, None))
        decided, _, conflicts = n.partition(".")
        if flash == "bulk_decided" and not _same(sig, sessions.sign("flash", n)):
            flash_kind = message = None  # counts this server did not sign: a made-up link
        pending_here = (
            [row for row in found if row["status"] == "pending"] if reason and source else []
        )
        return render(
            "queue.html",
            request,
            flash_kind=flash_kind,
            flash=message.format(n=decided, m=conflicts) if message else None,
            bulk_pending=len(pending_here),
            bulk_seen=max((row["id"] for row in pending_here), default=0),
            bulk_setting=review_queue.source_setting(pending_here[0]) if pending_here else None,
            max_note=MAX_NOTE_CHARS,
            items=_masked_all(found[:QUEUE_ROWS], policy),
            total=len(found),
            counts=counts,
            statuses=review_queue.STATUSES,
            reasons=sorted({row["reason"] for row in tally}),
            sources=sorted({row["source"] for row in tally}),
            status=status,
            reason=reason,
            source=source,
        )

    @app.get("/items/{item_id}")
    def item_page(request: Request, reviewer: Reviewer, item_id: str, flash: str = "") -> Response:
        return item_view(request, reviewer, item_id, flash, reveal=False)

    @app.post("/items/{item_id}/reveal")
    async def reveal(request: Request, reviewer: Reviewer, item_id: str) -> Response:
        """The item with the personal data the policy masks shown, for a reviewer with the
        permission; logged. A POST with the form token: no link can reveal on anyone's behalf."""
        form = await _form(request)
        sessions.check_form_token(request.cookies.get(SESSION_COOKIE), form.get("csrf"))
        if not may_reveal(request, reviewer):
            raise Refused(
                403,
                "Revealing personal data needs the permission (review.reveal) and a log-in with "
                "your own token (thresher review token NAME), not the shared one.",
            )
        return await run_in_threadpool(item_view, request, reviewer, item_id, "", True)

    def may_reveal(request: Request, reviewer: str) -> bool:
        """Listed in review.reveal and logged in with their own token: the shared token logs
        in under any name, so it never carries the permission."""
        return reviewer in review.reveal and sessions.own_token(request.cookies.get(SESSION_COOKIE))

    def item_view(
        request: Request, reviewer: str, item_id: str, flash: str, reveal: bool
    ) -> Response:
        entry = _item(catalog, item_id)
        item_id = entry["id"]
        revealed = reveal and entry["erased_by_request"] is None
        if revealed:
            review_queue.log_reveal(catalog, item_id, reviewer)
        shown = entry if revealed else _masked(entry, policy)
        kind, message = FLASHES.get(flash, (None, None))
        if entry["status"] == "pending" and not flash.startswith(("note_", "label_")):
            kind = message = None  # a decision's message on an undecided item is a made-up link
        of_record = review_queue.record_items(catalog, entry)
        if message:
            when = entry["decided_at"]
            message = message.format(
                reviewer=entry["reviewer"],
                status=entry["status"],
                decided_at=f"{when:%Y-%m-%d %H:%M:%S}" if when else "an unknown time",
                n=sum(1 for other in of_record if other["status"] == entry["status"]),
            )
        members = review_queue.members(entry)
        return render(
            "item.html",
            request,
            item=shown,
            revealed=revealed,
            may_reveal=may_reveal(request, reviewer) and shown is not entry,
            reveals=review_queue.reveals(catalog, item_id),
            evidence=_pretty_json(entry["evidence"]),
            evidence_list=_readable(entry["evidence"]),
            record_items=of_record,
            record_pending=[other["id"] for other in of_record if other["status"] == "pending"],
            next_pending=review_queue.next_pending(catalog, item_id),
            source_setting=review_queue.source_setting(entry),
            license=_license(catalog, entry),
            metadata=_pretty_json(shown["metadata"]),
            history=review_queue.history(catalog, item_id),
            flash_kind=kind,
            flash=message,
            max_note=MAX_NOTE_CHARS,
            needs_label=entry["reason"] in review_queue.LABEL_REASONS,
            members=members,
            members_total=review_queue.members_total(entry),
            label_choices=sorted(
                str(label) for label in review_queue.member_label_counts(entry) if label is not None
            ),
            labels=review_queue.labels(catalog, item_id),
            max_label=MAX_LABEL_CHARS,
        )

    @app.post("/items/{item_id}/decision")
    async def decision(request: Request, item_id: str, reviewer: Reviewer) -> Response:
        item_id = _item(catalog, item_id)["id"]
        form = await _form(request)
        sessions.check_form_token(request.cookies.get(SESSION_COOKIE), form.get("csrf"))
        verdict, note = form.get("decision"), form.get("note", "").strip()
        if verdict not in review_queue.DECISIONS:
            raise Refused(400, f"decision must be one of {', '.join(review_queue.DECISIONS)}")
        # only approving a label conflict takes a label: the kept record is published with it
        labelled = verdict == "approved" and _item(catalog, item_id)["reason"] in (
            review_queue.LABEL_REASONS
        )
        label = form.get("label", "").strip() if labelled else None
        _check_note(note)
        if not note:
            outcome = "note_missing"
        elif len(note) > MAX_NOTE_CHARS:
            outcome = "note_too_long"
        elif labelled and not label:
            outcome = "label_missing"
        elif labelled and len(label) > MAX_LABEL_CHARS:
            outcome = "label_too_long"
        elif form.get("scope") == "record" and not labelled:
            entry = _item(catalog, item_id)
            pending = [  # label conflicts each need their label: decided one by one
                other["id"]
                for other in review_queue.record_items(catalog, entry)
                if other["status"] == "pending"
                and other["reason"] not in review_queue.LABEL_REASONS
            ]
            await run_in_threadpool(_decide_all, catalog, pending, verdict, reviewer, note)
            outcome = "record_decided"
        else:
            outcome = await run_in_threadpool(
                _decide, catalog, item_id, verdict, reviewer, note, label
            )
        return RedirectResponse(f"/items/{item_id}?flash={outcome}", status_code=303)

    @app.post("/bulk")
    async def bulk(request: Request, reviewer: Reviewer) -> Response:
        """Decide every pending item of one source and one reason with one note (the
        decision log keeps one row per item)."""
        form = await _form(request)
        sessions.check_form_token(request.cookies.get(SESSION_COOKIE), form.get("csrf"))
        verdict, note = form.get("decision"), form.get("note", "").strip()
        source, reason = form.get("source", ""), form.get("reason", "")
        if verdict not in review_queue.DECISIONS:
            raise Refused(400, f"decision must be one of {', '.join(review_queue.DECISIONS)}")
        if reason in review_queue.LABEL_REASONS:
            raise Refused(400, "label conflicts are decided one by one: each needs its label")
        _check_note(note)
        back = {"status": "pending", "source": source, "reason": reason}
        if not source or not reason:
            outcome, decided, conflicts = "bulk_needs_filter", [], []
        elif not note or len(note) > MAX_NOTE_CHARS:
            outcome, decided, conflicts = "bulk_note_missing", [], []
        else:
            # the items the reviewer saw: none queued after the page was shown
            seen = int(form["seen"]) if form.get("seen", "").isdigit() else 0
            pending = review_queue.items(catalog, status="pending", reason=reason, source=source)
            decided, conflicts = await run_in_threadpool(
                _decide_all, catalog, [row["id"] for row in pending if row["id"] <= seen],
                verdict, reviewer, note,
            )  # fmt: skip
            outcome = "bulk_decided"
        counts = f"{len(decided)}.{len(conflicts)}"
        query = urlencode(
            {**back, "flash": outcome, "n": counts, "sig": sessions.sign("flash", counts)}
        )
        return RedirectResponse(f"/?{query}", status_code=303)

    return app


def _local(target: str) -> str:
    """`target` if it is a path on this server, else "/": a login link cannot send a reviewer
    elsewhere."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or "\\" in target:
        return "/"
    return target


def _own_origin(request: Request) -> bool:
    """Whether the Origin (or, without one, the Referer) header, when sent, names this server."""
    own = f"{request.url.scheme}://{request.url.netloc}".lower()
    origin = request.headers.get("origin")
    if origin is None and (referer := request.headers.get("referer")) is not None:
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    return origin is None or origin.lower() == own


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form body (the first value of each field), after the origin check. A body
    over MAX_FORM_BYTES is refused by its Content-Length before any of it is read, or, sent in
    chunks, as soon as what was read passes the limit."""
    if not _own_origin(request):
        raise Refused(403, "This form was posted from another site; nothing was done.")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_FORM_BYTES:
        raise Refused(413, "The form is too large.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, "The form is too large.")
    try:  # strict: a note of bytes that are not UTF-8 is refused, not stored altered
        fields = parse_qs(
            body.decode("utf-8"), keep_blank_values=True, max_num_fields=20, errors="strict"
        )
    except UnicodeDecodeError as error:
        raise Refused(400, "The form is not valid UTF-8 text; nothing was done.") from error
    except ValueError as error:
        raise Refused(400, "The form could not be read.") from error
    return {name: values[0] for name, values in fields.items()}


def _check_note(note: str) -> None:
    try:
        review_queue.checked_note(note)
    except DataError as error:
        raise Refused(400, f"Not decided: {error}.") from error


def _item(catalog: Catalog, item_id: int | str) -> dict[str, Any]:
    """The item of a path's id; 404 for anything that is not the id of an item (words, signs,
    numbers too large for the database)."""
    text = str(item_id)
    try:
        if not (text.isascii() and text.isdigit() and len(text) <= 19):  # 2**63 has 19 digits
            raise DataError(f"not an item id: {text!r}")
        return review_queue.item(catalog, int(text))
    except DataError as error:
        raise Refused(404, f"There is no review item {text[:40]}.") from error


def _decide(
    catalog: Catalog, item_id: int, verdict: str, reviewer: str, note: str, label: str | None
) -> str:
    """Decide one item as `thresher review approve | reject` does; return the flash code."""
    _item(catalog, item_id)
    outcome = review_queue.decide(catalog, item_id, verdict, reviewer, note, label)
    if isinstance(outcome, review_queue.Conflict):
        return "conflict"
    if verdict == "rejected" or not os.environ.get("PREFECT_API_URL"):
        return verdict
    announced = _announce(catalog, verdict, [item_id])
    return "approved_announced" if announced else "approved_not_announced"


def _decide_all(
    catalog: Catalog, item_ids: list[int], verdict: str, reviewer: str, note: str
) -> tuple[list[int], list[int]]:
    """Decide several items with one note, then announce the approvals: (decided, already
    decided by someone else)."""
    decided, conflicts = review_queue.decide_many(catalog, item_ids, verdict, reviewer, note)
    _announce(catalog, verdict, decided)
    return decided, conflicts


def _announce(catalog: Catalog, verdict: str, item_ids: list[int]) -> bool:
    """Tell the release-approved flow about approvals (by dataset); whether every one was
    announced. A failure is logged: the decisions stand and the schedule catches up."""
    if verdict != "approved" or not item_ids or not os.environ.get("PREFECT_API_URL"):
        return False
    from flows.release import emit_approved

    by_dataset: dict[str, list[int]] = {}
    for item_id in item_ids:
        by_dataset.setdefault(review_queue.item(catalog, item_id)["dataset"], []).append(item_id)
    sent = True
    for dataset, ids in by_dataset.items():
        try:
            sent = emit_approved(dataset, ids) and sent
        except Exception:  # noqa: BLE001
            logger.exception("could not announce the approval of review items %s", ids)
            sent = False
    return sent


def _tally(catalog: Catalog) -> list[dict[str, Any]]:
    """Items per (reason, source, status): the filters' choices and the counts."""
    table = tables.review_items
    query = select(table.c.reason, table.c.source, table.c.status, func.count().label("n"))
    query = query.group_by(table.c.reason, table.c.source, table.c.status)
    with catalog.engine.connect() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def _license(catalog: Catalog, entry: dict[str, Any]) -> str | None:
    """The record's license: as a license reason's evidence names it, else as its source
    declared it in the run that queued it (None when that run's config is gone)."""
    named = review_queue.evidence_license(entry)
    if named:
        return named
    config = catalog.workdir / "runs" / entry["run_id"] / "config.json"
    try:
        sources = json.loads(config.read_text())["config"]["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    declared = next((s.get("license") for s in sources if s.get("name") == entry["source"]), None)
    return f"{declared} (as the source declares it)" if declared else None


MASKED_FIELDS = ("text", "metadata", "group", "label")


def _masked(entry: dict[str, Any], policy: PolicyConfig) -> dict[str, Any]:
    return _masked_all([entry], policy)[0]


def _masked_all(entries: list[dict[str, Any]], policy: PolicyConfig) -> list[dict[str, Any]]:
    """The items with the personal data their source's policy does not keep replaced by
    labels (`<EMAIL>`, `<PHONE>`, …), as the shards show it: one scan for all of them."""
    masked_types = {
        source: {
            kind
            for kind, action in policy.for_source(source).personal_data.model_dump().items()
            if action != "keep"
        }
        for source in {entry["source"] for entry in entries}
    }
    values = [entry[field] for entry in entries for field in MASKED_FIELDS]
    if not any(masked_types.values()) or not any(values):
        return entries
    found = find_personal_data(pl.Series(values, dtype=pl.String)).to_dicts()
    by_value: dict[int, list[dict]] = {}
    for finding in found:
        entry = entries[finding["index"] // len(MASKED_FIELDS)]
        if finding["type"] in masked_types[entry["source"]]:
            by_value.setdefault(finding["index"], []).append(finding)
    shown = [dict(entry) for entry in entries]
    for index, findings in by_value.items():
        entry, field = divmod(index, len(MASKED_FIELDS))
        name = MASKED_FIELDS[field]
        shown[entry][name] = redact_personal_data(shown[entry][name], findings)
    return shown


def _readable(evidence: str | None) -> list[tuple[str, str]]:
    """The evidence as (name, value) rows a reviewer reads: nested findings one per line as
    `key=value` pairs, lists joined, numbers as they are."""
    try:
        decoded = json.loads(evidence or "null")
    except ValueError:
        return [("evidence", evidence or "")]
    if not isinstance(decoded, dict):
        return [] if decoded is None else [("evidence", json.dumps(decoded))]

    def shown(value: Any) -> str:
        if isinstance(value, dict):
            return " ".join(f"{k}={shown(v)}" for k, v in value.items())
        if isinstance(value, list):
            joiner = "\n" if any(isinstance(v, dict) for v in value) else ", "
            return joiner.join(shown(v) for v in value)
        return "" if value is None else str(value)

    return [(key.replace("_", " "), shown(value)) for key, value in decoded.items()]


def _pretty_json(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return json.dumps(json.loads(value), indent=2, ensure_ascii=False)
    except ValueError:
        return value
