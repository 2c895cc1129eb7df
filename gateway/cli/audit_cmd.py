"""`gateway db` and `gateway audit`: the audit database and the audit log.

    $ gateway db upgrade
    $ gateway audit list --task compliance_review --since 2026-11-01
    $ gateway audit verify --checkpoint head.json

`verify` exits 0 when the log is intact and 1 on any defect, naming the first bad seq.
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import click

from audit import (
    AuditStore,
    EventFilter,
    EventKind,
    StoredEvent,
    VerifyReport,
    export_events,
    list_requests,
)
from audit import checkpoint as checkpoints
from audit.migrate import current as current_revision
from audit.migrate import head_revision, upgrade
from audit.roles import grant
from gateway.errors import ConfigurationError, InputError
from gateway.settings import Settings

PROGRESS_THRESHOLD = 20_000  # below this a verify is over before a bar is worth drawing


def _settings() -> Settings:
    return Settings.from_env()


@contextmanager
def _store() -> Iterator[AuditStore]:
    settings = _settings()
    with AuditStore.open(settings.database_url, settings.durability.value) as store:
        yield store


def _when(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 date or time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _filter_options(fn: Any) -> Any:
    kinds = click.Choice([k.value for k in EventKind])
    for option in reversed(
        [
            click.option("--task", help="Only this task."),
            click.option("--caller", help="Only this calling service."),
            click.option("--kind", type=kinds, help="Only events (requests) of this kind."),
            click.option("--since", callback=_when, help="From this UTC time (ISO 8601)."),
            click.option("--until", callback=_when, help="Before this UTC time (ISO 8601)."),
        ]
    ):
        fn = option(fn)
    return fn


@contextmanager
def _output(path: Path | None) -> Iterator[TextIO]:
    if path is None:
        yield sys.stdout
        return
    try:
        with path.open("w", encoding="utf-8", newline="") as fh:
            yield fh
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}.") from None


# -- gateway db ----------------------------------------------------------------------------------


@click.group("db")
def db_group() -> None:
    """Create and upgrade the audit database schema."""


@db_group.command("upgrade")
def db_upgrade() -> None:
    """Upgrade the audit database (GATEWAY_DATABASE_URL) to the current schema."""
    revision = upgrade(_settings().database_url)
    click.echo(f"audit database at schema revision {revision} (head).")


@db_group.command("current")
def db_current() -> None:
    """Show the audit database's schema revision."""
    revision = current_revision(_settings().database_url)
    head = head_revision()
    state = "up to date" if revision == head else "behind: run `gateway db upgrade`"
    click.echo(f"revision {revision or 'none'} (this gateway needs {head}; {state})")


@db_group.command("grant")
@click.argument("role")
@click.option(
    "--read-only",
    is_flag=True,
    help="A reviewer: read everything (list, show, verify), append only export and "
    "checkpoint records.",
)
def db_grant(role: str, read_only: bool) -> None:
    """Give a PostgreSQL ROLE INSERT and SELECT on the audit tables, and nothing else."""
    for statement in grant(_settings().database_url, role, read_only=read_only):
        click.echo(statement + ";")


# -- gateway audit -------------------------------------------------------------------------------


@click.group("audit")
def audit_group() -> None:
    """List, show, verify, checkpoint and export the audit log."""


@audit_group.command("list")
@_filter_options
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table")
def audit_list(limit: int, fmt: str, **filters: Any) -> None:
    """One row per request with its status (completed, failed, rejected, cache hit, ...)."""
    with _store() as store:
        rows = list_requests(store, EventFilter(**filters), limit=limit or None)
    records = [r.model_dump(mode="json") for r in rows]
    if fmt == "json":
        click.echo(json.dumps(records, indent=2))
    elif fmt == "jsonl":
        for record in records:
            click.echo(json.dumps(record))
    else:
        header = f"{'seq':>8}  {'started (UTC)':19}  {'status':11}  {'task':24}  {'caller':18}  id"
        click.echo(header)
        for r in rows:
            click.echo(
                f"{r.first_seq:>8}  {r.started_at:%Y-%m-%d %H:%M:%S}  {r.status:11}  "
                f"{(r.task or '-')[:24]:24}  {(r.caller or '-')[:18]:18}  {r.request_id}"
            )


def _event_json(event: StoredEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "kind": event.kind.value,
        "recorded_at": event.recorded_at.isoformat(),
        "event_id": event.event_id,
        "task": event.task,
        "caller": event.caller,
        "policy_fingerprint": event.policy_fingerprint,
        "request_hash": event.request_hash,
        "hash": event.hash,
        "data": event.data,
        "payloads": event.payload_digests,
    }


@audit_group.command("show")
@click.argument("request_id")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def audit_show(request_id: str, fmt: str) -> None:
    """A request's whole life: intent, attempts, outcome or cache hit."""
    with _store() as store:
        events = store.events_for_request(request_id)
    if not events:
        raise InputError(
            f"no audit events for request {request_id!r}.",
            hint="List request ids with `gateway audit list`.",
        )
    if fmt == "json":
        payload = {"request_id": request_id, "events": [_event_json(e) for e in events]}
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    first = events[0]
    click.echo(f"request {request_id}  task {first.task or '-'}  caller {first.caller or '-'}")
    for e in events:
        click.echo(f"  seq {e.seq:<8} {e.recorded_at:%Y-%m-%d %H:%M:%S.%f}  {e.kind.value}")
        for key in sorted(e.data):
            click.echo(f"      {key}: {json.dumps(e.data[key], ensure_ascii=False)[:200]}")
        for name, content in sorted(e.payload_digests.items()):
            click.echo(f"      payload {name}: {content}")


def _trusted_key(public_key: str | None) -> str | None:
    if public_key is not None:
        return public_key.strip().lower()
    secret = _settings().checkpoint_key
    return (
        checkpoints.public_key(checkpoints.parse_key(secret.get_secret_value())) if secret else None
    )


def _print_report(report: VerifyReport, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    if report.ok:
        tail = f", extends checkpoint seq {report.checkpoint_seq}" if report.checkpoint_seq else ""
        click.echo(
            f"intact: {report.events_checked} events, head seq {report.head_seq} "
            f"{report.head_hash}{tail}"
        )
        return
    click.echo(
        f"DEFECTS: {len(report.defects)} found in {report.events_checked} events; "
        f"first bad seq {report.first_bad_seq}"
    )
    for d in report.defects[:50]:
        click.echo(f"  seq {d.seq if d.seq is not None else '-'}: {d.kind.value}: {d.detail}")


@audit_group.command("verify")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also prove the log still contains and extends this checkpoint.",
)
@click.option("--public-key", help="Hex Ed25519 key the checkpoint must be signed with.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def audit_verify(checkpoint_file: Path | None, public_key: str | None, fmt: str) -> None:
    """Recompute every hash and link; exit 0 if intact, 1 on any defect."""
    checkpoint = None
    if checkpoint_file is not None:
        checkpoint = checkpoints.loads(
            checkpoint_file.read_text(encoding="utf-8"),
            trusted_public_key=_trusted_key(public_key),
        )
    with _store() as store:
        total = store.head()[0]
        if total < PROGRESS_THRESHOLD:
            report = store.verify(checkpoint=checkpoint)
        else:
            with click.progressbar(length=total, label="verifying", file=sys.stderr) as bar:
                done = [0]

                def progress(n: int, _total: int) -> None:
                    bar.update(n - done[0])
                    done[0] = n

                report = store.verify(progress, checkpoint=checkpoint)
    _print_report(report, fmt)
    if not report.ok:
        sys.exit(1)


@audit_group.command("checkpoint")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--unsigned", is_flag=True, help="Write an unsigned head (no key configured).")
def audit_checkpoint(output: Path | None, unsigned: bool) -> None:
    """Record a checkpoint and write the signed head (GATEWAY_CHECKPOINT_KEY)."""
    secret = _settings().checkpoint_key
    if secret is None and not unsigned:
        raise ConfigurationError(
            "no checkpoint signing key is configured.", hint=checkpoints.KEY_HINT
        )
    key = checkpoints.parse_key(secret.get_secret_value()) if secret is not None else None
    with _store() as store:
        text = checkpoints.dumps(store.checkpoint(key))
    with _output(output) as out:
        out.write(text)


@audit_group.command("export")
@_filter_options
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--reviewer",
    default=getpass.getuser,
    show_default="your login name",
    help="Who is exporting, recorded with the export.",
)
def audit_export(fmt: str, output: Path | None, reviewer: str, **filters: Any) -> None:
    """Export events (bodies exactly as hashed); the export is recorded as an event."""
    with _store() as store, _output(output) as out:
        summary = export_events(
            store,
            out,
            "csv" if fmt == "csv" else "jsonl",
            EventFilter(**filters),
            reviewer=reviewer,
        )
    click.echo(f"exported {summary.events} events; recorded as seq {summary.export_seq}.", err=True)
