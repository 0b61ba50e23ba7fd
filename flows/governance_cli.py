"""Commands of the governance capability: the reviewer queue (`thresher review …`), deletion
requests (`thresher forget`), and withdrawn versions (`thresher catalog affected | withdraw
| purge`). flows.cli registers them."""

from __future__ import annotations

import json
import re
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from flows.cli_common import (
    ConfigOption,
    JsonOption,
    RefArgument,
    WorkdirOption,
    checked,
    emit,
    fail,
    find_version,
    for_console,
    open_catalog,
    stderr,
)
from pipeline.core.errors import ThresherError

review_app = typer.Typer(help="The reviewer quarantine queue.", no_args_is_help=True)
ReviewerOption = Annotated[
    str, typer.Option("--reviewer", help="Your name; recorded with the decision.")
]
NoteOption = Annotated[str, typer.Option("--note", help="Why: recorded with the decision.")]
ItemIds = Annotated[list[int], typer.Argument(help="Review item ids (see `thresher review list`).")]
LabelOption = Annotated[
    str | None,
    typer.Option(
        "--label",
        help="The label the kept record of a label conflict is published with (required to "
        "approve a label_conflict item; `thresher review show ID` lists its members' labels).",
    ),
]


@review_app.command("list")
def review_list(
    reason: Annotated[str | None, typer.Option("--reason", help="Only this reason code.")] = None,
    source: Annotated[str | None, typer.Option("--source", help="Only this source.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="pending, approved or rejected.")
    ] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List review items, oldest first."""
    from data_catalog import review_queue

    if status is not None and status not in review_queue.STATUSES:
        fail(f"--status must be one of {', '.join(review_queue.STATUSES)}, not {status!r}")
    found = review_queue.items(
        open_catalog(workdir, config), status=status, reason=reason, source=source
    )
    table = Table("id", "status", "reason", "source", "record", "queued", "reviewer")
    for entry in found:
        if as_json:
            shown = ("text", "metadata", "group", "label")
            emit({key: value for key, value in entry.items() if key not in shown})
        table.add_row(
            str(entry["id"]),
            entry["status"],
            for_console(entry["reason"]),
            for_console(entry["source"]),
            for_console(entry["record_id"][:16]),
            f"{entry['created_at']:%Y-%m-%d %H:%M}",
            for_console(entry["reviewer"] or ""),
        )
    if not as_json:
        Console().print(table)
    stderr.print(f"{len(found)} item(s)")


@review_app.command("show")
def review_show(
    item_id: int,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one item: its record (secrets masked), the evidence, and its decision history."""
    from data_catalog import review_queue

    catalog = open_catalog(workdir, config)
    entry = checked(review_queue.item, catalog, item_id)
    history = review_queue.history(catalog, item_id)
    labels = review_queue.labels(catalog, item_id)
    if as_json:
        emit({**entry, "history": history, "labels": labels})
        return
    # Every value below may come from a record or a reviewer: escaped for the terminal (no
    # control sequences) and for rich (no markup).
    console = Console(highlight=False)
    status = for_console(f"[{entry['status']}]")
    console.print(f"[bold]item {entry['id']}[/]  {status}  {for_console(entry['reason'])}")
    for label in ("record_id", "source", "source_content_hash", "dataset", "run_id"):
        console.print(f"  {label:<20} {for_console(entry[label])}")
    if entry["reason"] not in review_queue.LABEL_REASONS:  # those: the members' table below
        evidence = json.dumps(json.loads(entry["evidence"] or "null"))  # \u-escaped by JSON
        console.print(f"  {'evidence':<20} {for_console(evidence)}")
    for field in ("group", "label", "metadata", "adjudicated_label"):
        if entry[field]:
            console.print(f"  {field:<20} {for_console(entry[field])}")
    if entry["reason"] in review_queue.LABEL_REASONS:
        _print_members(console, entry, labels)
    if entry["erased_by_request"] is not None:
        console.print(f"[bold]text[/] erased by deletion request {entry['erased_by_request']}")
    else:
        console.print("[bold]text[/] (secrets masked):")
        console.print(for_console(entry["text"], multiline=True))
    for decision in history:
        console.print(
            f"  {decision['decided_at']:%Y-%m-%d %H:%M:%S} {decision['decision']} by "
            f"{for_console(decision['reviewer'])}: {for_console(decision['note'] or '', multiline=True)}"
        )


def _print_members(console: Console, entry: dict, labels: list[dict]) -> None:
    """A label conflict's members (the kept record marked) and every reviewer's label."""
    from data_catalog import review_queue

    method = (json.loads(entry["evidence"] or "{}") or {}).get("method", "?")
    title = f"cluster members ({method} duplicates, different labels)"
    members = Table("record_id", "source", "label", "", title=title, title_justify="left")
    for member in review_queue.members(entry):
        kept = "kept (this item)" if member.get("record_id") == entry["record_id"] else ""
        shown = member.get("label")
        members.add_row(  # a table's cells are markup
            for_console(member.get("record_id")),
            for_console(member.get("source")),
            "(no label)" if shown is None else for_console(shown),
            kept,
        )
    console.print(members)
    listed, total = len(review_queue.members(entry)), review_queue.members_total(entry)
    if total > listed:
        console.print(f"  the first {listed} of {total} members")
    console.print(f"  {'labels':<20} {for_console(review_queue.member_labels(entry))}")
    for row in labels:
        console.print(
            f"  labelled {for_console(row['label'])} by {for_console(row['reviewer'])} at "
            f"{row['labelled_at']:%Y-%m-%d %H:%M}"
        )


def _decide(
    decision: str,
    ids: list[int],
    reviewer: str,
    note: str,
    workdir,
    config,
    as_json: bool,
    label: str | None = None,
) -> None:
    from data_catalog import review_queue

    if not reviewer.strip():
        fail("a decision needs the reviewer's name (--reviewer NAME)")
    checked(review_queue.checked_note, note)
    catalog = open_catalog(workdir, config)
    for item_id in ids:  # every id must exist, and take the label, before any item is decided
        entry = checked(review_queue.item, catalog, item_id)
        checked(review_queue.checked_label, entry, decision, label)
    conflicts = 0
    approved: dict[str, list[int]] = {}  # dataset -> items approved now
    for item_id in ids:
        outcome = checked(review_queue.decide, catalog, item_id, decision, reviewer, note, label)
        if isinstance(outcome, review_queue.Conflict):
            conflicts += 1
            stderr.print(f"[yellow]conflict:[/] {for_console(outcome.message)}", highlight=False)
            if as_json:
                emit({"item_id": item_id, "decided": False, "conflict": outcome.message})
        else:
            if decision == "approved":
                dataset = review_queue.item(catalog, item_id)["dataset"]
                approved.setdefault(dataset, []).append(item_id)
            labelled = f" with label {label}" if label is not None else ""
            stderr.print(
                f"item {item_id}: {decision} by {for_console(reviewer + labelled)}", highlight=False
            )
            if as_json:
                labelled_json = {} if label is None else {"label": label}
                emit({"item_id": item_id, "decided": True, "decision": decision, **labelled_json})
    if approved:
        from flows.release import emit_approved

        for dataset, approved_ids in approved.items():
            emit_approved(dataset, approved_ids)
    if conflicts:
        raise typer.Exit(1)


@review_app.command("approve")
def review_approve(
    ids: ItemIds,
    reviewer: ReviewerOption,
    note: NoteOption,
    label: LabelOption = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve items: their records pass governance on the next run; a label conflict's kept
    record is published with --label (exit 1 if any item was already decided)."""
    _decide("approved", ids, reviewer, note, workdir, config, as_json, label)


@review_app.command("reject")
def review_reject(
    ids: ItemIds,
    reviewer: ReviewerOption,
    note: NoteOption,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reject items: their content is dropped by every later run and never queued again."""
    _decide("rejected", ids, reviewer, note, workdir, config, as_json)


@review_app.command("label")
def review_label(
    item_id: int,
    label: Annotated[str, typer.Option("--label", help="Your label for the item's record.")],
    reviewer: ReviewerOption,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Label a label-conflict item without deciding it (any status; replaces your earlier
    label): `thresher review agreement` compares reviewers' labels."""
    from data_catalog import review_queue

    catalog = open_catalog(workdir, config)
    checked(review_queue.record_label, catalog, item_id, reviewer, label)
    stderr.print(f"item {item_id}: labelled {label.strip()} by {reviewer}", highlight=False)
    if as_json:
        emit({"item_id": item_id, "reviewer": reviewer, "label": label.strip()})


@review_app.command("agreement")
def review_agreement(
    reason: Annotated[
        str | None, typer.Option("--reason", help="Only items of this reason code.")
    ] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Agreement between every two reviewers who labelled common items: observed and chance
    agreement, and Cohen's kappa (undefined, shown as -, when chance agreement is 1)."""
    from data_catalog import review_queue

    pairs = checked(review_queue.agreement, open_catalog(workdir, config), reason)
    if not pairs:
        scope = f" of reason {reason}" if reason else ""
        stderr.print(
            f"no two reviewers labelled a common item{scope}: nothing to compare "
            "(see `thresher review label ID --label L --reviewer R`)",
            highlight=False,
        )
        return
    table = Table("reviewer", "reviewer", "items", "agreed", "observed", "expected", "kappa")
    for pair in pairs:
        if as_json:
            emit(pair)
        kappa = "-" if pair["kappa"] is None else f"{pair['kappa']:.3f}"
        table.add_row(
            *pair["reviewers"],
            str(pair["items"]),
            str(pair["agreed"]),
            f"{pair['observed']:.3f}",
            f"{pair['expected']:.3f}",
            kappa,
        )
    if not as_json:
        Console().print(table)
    stderr.print(f"{len(pairs)} pair(s) of reviewers", highlight=False)


@review_app.command("serve")
def review_serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8765,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
) -> None:
    """Serve the reviewer web page: the queue, each item, approve / reject with a note.
    Reviewers log in with a token from the run config's `review: reviewers:` (see `thresher
    review token`) or the shared one in $THRESHER_REVIEW_TOKEN."""
    import ipaddress
    import os

    import uvicorn

    from flows.review_server import TOKEN_ENV, create_app
    from pipeline.config import PolicyConfig, ReviewConfig, load_run_config

    loaded = checked(load_run_config, config) if config is not None else None
    review = loaded.review if loaded is not None else ReviewConfig()
    policy = loaded.policy if loaded is not None else PolicyConfig()
    catalog = open_catalog(workdir, config)
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        loopback = False
    # On this machine only, answer only its own names: not a site rebinding its name to it
    allowed_hosts = ["127.0.0.1", "localhost", host] if loopback and ":" not in host else None
    if not loopback:
        stderr.print(
            f"[yellow]warning:[/] serving on {host}, beyond this machine: reviewer pages show "
            "personal data and tokens travel in clear over plain HTTP; put a TLS proxy in "
            "front or keep to 127.0.0.1",
            highlight=False,
        )
    if not review.reviewers and not os.environ.get(TOKEN_ENV):
        stderr.print(
            "[yellow]warning:[/] no reviewer token is configured, so no one can log in: see "
            f"`thresher review token NAME` (with --config), or set ${TOKEN_ENV}",
            highlight=False,
        )
    stderr.print(f"reviewer page on http://{host}:{port}/ (Ctrl+C stops it)", highlight=False)
    app = create_app(catalog, review, allowed_hosts=allowed_hosts, policy=policy)
    uvicorn.run(app, host=host, port=port, log_level="warning")


@review_app.command("token")
def review_token(
    name: Annotated[str, typer.Argument(help="The reviewer's name, as they log in.")],
) -> None:
    """Make a reviewer token: the token goes to the reviewer (stdout, shown once), the line for
    the run config's `review: reviewers:` to stderr (only its sha256 is stored)."""
    import hashlib
    import secrets

    name = name.strip()
    if not name:
        fail("a reviewer token needs the reviewer's name")
    token = secrets.token_urlsafe(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    # a JSON string is also a YAML string: names with spaces or colons stay one key
    key = name if re.fullmatch(r"[A-Za-z0-9_.-]+", name) else json.dumps(name, ensure_ascii=False)
    print(token)
    stderr.print("put this line under `review: reviewers:` in the run config:", highlight=False)
    stderr.print(f"  {key}: sha256:{digest}", markup=False, highlight=False)


def forget(
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded).")],
    source: Annotated[
        str | None, typer.Option("--source", help="Every record of a source.")
    ] = None,
    group: Annotated[str | None, typer.Option("--group", help="Every record of a group.")] = None,
    record_id: Annotated[
        str | None, typer.Option("--record-id", help="One record, by its 32-hex record_id.")
    ] = None,
    source_id: Annotated[
        str | None,
        typer.Option("--id", help="One record, by the id it has in its source (with --source)."),
    ] = None,
    content_hash: Annotated[
        str | None, typer.Option("--content-hash", help="Records with this text (either hash).")
    ] = None,
    withdraw: Annotated[
        bool, typer.Option("--withdraw", help="Also withdraw every version that held them.")
    ] = False,
    requested_by: Annotated[str | None, typer.Option("--requested-by")] = None,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Record a deletion request: every later run drops the matching records."""
    from data_catalog import deletions
    from pipeline.core.identity import record_id_of

    if source_id is not None:  # the record's id in its source names one record of it
        if source is None:
            fail("--id names a record by its id in a source: give the source too (--source S)")
        record_id, source = record_id_of(source, source_id), None
    if record_id is not None and not re.fullmatch(r"[0-9a-f]{32}", record_id):
        fail(
            f"{record_id!r} is not a record_id (32 hex digits, as in the shards and the ledger); "
            "to name a record by the id it has in its source, use --source S --id ID"
        )
    named = {
        kind: value
        for kind, value in (
            ("source", source),
            ("group", group),
            ("record_id", record_id),
            ("content_hash", content_hash),
        )
        if value is not None
    }
    if len(named) != 1:
        fail("name exactly one of --source, --group, --record-id, --content-hash")
    ((kind, value),) = named.items()
    catalog = open_catalog(workdir, config)
    try:
        request_id = deletions.record_request(catalog, kind, value, reason, requested_by)
        affected = deletions.affected(catalog, request_id)
        withdrawn = []
        if withdraw:
            for hit in affected:
                if hit.version.status != "withdrawn":
                    catalog.withdraw(
                        hit.version.dataset_hash, f"deletion request {request_id}: {reason}"
                    )
                    withdrawn.append(hit.version.dataset_hash)
    except ThresherError as error:
        fail(str(error))
    if as_json:
        emit(
            {
                "request_id": request_id,
                "kind": kind,
                "affected": [hit.version.dataset_hash for hit in affected],
                "withdrawn": withdrawn,
            }
        )
    stderr.print(f"deletion request {request_id} recorded: later runs drop {kind} {value}")
    _print_affected(affected)
    for dataset_hash in withdrawn:
        stderr.print(f"withdrew {dataset_hash[:16]}")


def _print_affected(affected) -> None:
    if not affected:
        stderr.print("no published version contained matching records")
    for hit in affected:
        count = "unknown (shards purged)" if hit.records is None else f"{hit.records} record(s)"
        stderr.print(
            f"  {hit.version.name} {hit.version.dataset_hash[:16]} [{hit.version.status}]: {count}"
        )
        for run in hit.training_runs:
            stderr.print(
                f"    training run {run['run_id']} ({run['objective']}): {run['status']}",
                markup=False,
                highlight=False,
            )


def catalog_affected(
    request_id: int,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the versions that contained records of a deletion request, and the training runs
    on each (exit 1 if any version)."""
    from data_catalog import deletions

    catalog = open_catalog(workdir, config)
    affected = checked(deletions.affected, catalog, request_id)
    for hit in affected:
        if as_json:
            emit(
                {
                    "dataset_hash": hit.version.dataset_hash,
                    "name": hit.version.name,
                    "status": hit.version.status,
                    "records": hit.records,
                    "training_runs": [
                        {"run_id": run["run_id"], "status": run["status"]}
                        for run in hit.training_runs
                    ],
                }
            )
    _print_affected(affected)
    if affected:
        raise typer.Exit(1)


def catalog_withdraw(
    ref: RefArgument,
    reason: Annotated[str, typer.Option("--reason", help="Why (shown wherever it is listed).")],
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Withdraw a version: it stays listed with the reason; opening or training on it is refused."""
    catalog, version = find_version(ref, workdir, config)
    if version.status == "withdrawn":
        stderr.print(
            f"{version.dataset_hash[:16]} was already withdrawn on {version.withdrawn_at:%Y-%m-%d} "
            f"({version.status_reason}); nothing changed"
        )
    else:
        version = checked(catalog.withdraw, version.dataset_hash, reason)
        stderr.print(f"withdrew {version.dataset_hash[:16]} ({version.status_reason})")
    if as_json:
        emit(version.__dict__)


def catalog_purge(
    ref: RefArgument,
    workdir: WorkdirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete the shards of a withdrawn version; its manifest and ledger stay as the record."""
    catalog, version = find_version(ref, workdir, config)
    if version.purged_at is not None:
        stderr.print(
            f"the shards of {version.dataset_hash[:16]} were already purged on "
            f"{version.purged_at:%Y-%m-%d}; nothing changed"
        )
    else:
        version = checked(catalog.purge, version.dataset_hash)
        stderr.print(f"purged the shards of {version.dataset_hash[:16]}; manifest and ledger kept")
    if as_json:
        emit(version.__dict__)
