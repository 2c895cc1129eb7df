"""`gateway audit`: list, show, verify, checkpoint and export the audit log.

    $ gateway audit list --task compliance_review --since 2026-11-01
    $ gateway audit verify --checkpoint head.json

`verify` exits 0 when the log is intact and 1 on any defect, naming the first bad seq.
Each command parses its options, calls :class:`gateway.auditing.Auditing` and renders.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import click

from gateway.auditing import (
    Auditing,
    EventFilter,
    EventKind,
    VerifyReport,
    checkpoint_text,
    read_public_keys,
)
from gateway.cli._boundary import CheckFailed
from gateway.cli._context import settings_of
from gateway.cli._render import (
    Progress,
    echo_json,
    echo_jsonl,
    open_output,
    parse_when,
    shown,
)

PROGRESS_THRESHOLD = 20_000  # below this a verify is over before a bar is worth drawing


def _filter_options(fn: Any) -> Any:
    kinds = click.Choice([k.value for k in EventKind])
    for option in reversed(
        [
            click.option("--task", help="Only this task."),
            click.option("--caller", help="Only this calling service."),
            click.option("--kind", type=kinds, help="Only events (requests) of this kind."),
            click.option("--since", callback=parse_when, help="From this UTC time (ISO 8601)."),
            click.option("--until", callback=parse_when, help="Before this UTC time (ISO 8601)."),
        ]
    ):
        fn = option(fn)
    return fn


@click.group("audit")
def audit_group() -> None:
    """List, show, verify, checkpoint and export the audit log."""


@audit_group.command("list")
@_filter_options
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table")
@click.pass_context
def audit_list(ctx: click.Context, /, limit: int, fmt: str, **filters: Any) -> None:
    """One row per request with its status (completed, failed, rejected, cache hit, ...)."""
    with Auditing.open(settings_of(ctx)) as auditing:
        rows = auditing.requests(EventFilter(**filters), limit=limit or None)
    if fmt == "json":
        echo_json([r.model_dump(mode="json") for r in rows])
    elif fmt == "jsonl":
        echo_jsonl(r.model_dump(mode="json") for r in rows)
    else:
        header = f"{'seq':>8}  {'started (UTC)':19}  {'status':11}  {'task':24}  {'caller':18}  id"
        click.echo(header)
        for r in rows:
            click.echo(
                f"{r.first_seq:>8}  {r.started_at:%Y-%m-%d %H:%M:%S}  {shown(r.status):11}  "
                f"{_cell(r.task, 24)}  {_cell(r.caller, 18)}  {shown(r.request_id)}"
            )


def _cell(value: str | None, width: int) -> str:
    # Escaped first, then cut: a cut never lets a raw character through.
    return f"{shown(value or '-')[:width]:{width}}"


@audit_group.command("show")
@click.argument("request_id")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def audit_show(ctx: click.Context, request_id: str, fmt: str) -> None:
    """A request's whole life: intent, attempts, outcome or cache hit."""
    with Auditing.open(settings_of(ctx)) as auditing:
        events = auditing.request_events(request_id)
    if fmt == "json":
        echo_json({"request_id": request_id, "events": [e.json_row() for e in events]})
        return
    first = events[0]
    click.echo(
        f"request {shown(request_id)}  task {shown(first.task or '-')}  "
        f"caller {shown(first.caller or '-')}"
    )
    for e in events:
        click.echo(f"  seq {e.seq:<8} {e.recorded_at:%Y-%m-%d %H:%M:%S.%f}  {shown(e.kind.value)}")
        for key in sorted(e.data):
            value = shown(json.dumps(e.data[key], ensure_ascii=False))
            click.echo(f"      {shown(key)}: {value[:200]}")
        for name, content in sorted(e.payload_digests.items()):
            click.echo(f"      payload {shown(name)}: {shown(content)}")


UNPINNED_WARNING = (
    "WARNING: the checkpoint's signer {signer} is NOT a trusted key: it was accepted only "
    "because --unsafe-accept-unpinned-checkpoint was given, so it proves nothing about who "
    "made it."
)


def _unpinned(report: VerifyReport) -> str | None:
    if report.checkpoint_pinned is not False:
        return None
    return UNPINNED_WARNING.format(signer=report.checkpoint_signer or "(none: unsigned)")


def _trust_lines(report: VerifyReport) -> list[str]:
    """What the verify trusted, always said: which keys, legacy rows, the checkpoint."""
    if not report.signatures_checked:
        lines = ["record signatures: NOT checked (no trusted keys were given)"]
    elif report.trusted_keys:
        keys = ", ".join(f"{k.key_id} ({k.public_key})" for k in report.trusted_keys)
        lines = [f"record signatures checked against {len(report.trusted_keys)} key(s): {keys}"]
    else:
        lines = ["record signatures checked against NO trusted key: pass --public-key FILE"]
    if report.unsigned_allowed_before is not None:
        lines.append(
            f"unsigned events below seq {report.unsigned_allowed_before} accepted "
            f"(--allow-unsigned-before): {report.unsigned_allowed} found"
        )
    if report.checkpoint_seq is not None:
        if report.checkpoint_pinned:
            lines.append(f"checkpoint signed by trusted key {report.checkpoint_signer}")
        elif (warning := _unpinned(report)) is not None:
            lines.append(warning)
    return lines


def _print_report(report: VerifyReport, fmt: str) -> None:
    warning = _unpinned(report)
    if warning is not None:
        click.echo(warning, err=True)
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    if report.ok:
        tail = f", extends checkpoint seq {report.checkpoint_seq}" if report.checkpoint_seq else ""
        click.echo(
            f"intact: {report.events_checked} events, head seq {report.head_seq} "
            f"{shown(report.head_hash)}{tail}"
        )
    else:
        click.echo(
            f"DEFECTS: {len(report.defects)} found in {report.events_checked} events; "
            f"first bad seq {report.first_bad_seq}"
        )
        for d in report.defects[:50]:
            seq = d.seq if d.seq is not None else "-"
            click.echo(f"  seq {seq}: {shown(d.kind.value)}: {shown(d.detail)}")
    for line in _trust_lines(report):
        click.echo(shown(line))


@audit_group.command("verify")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also prove the log still contains and extends this checkpoint.",
)
@click.option(
    "--public-key",
    "public_key_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file of Ed25519 public keys (hex, one a line) to trust for record signatures "
    "and checkpoints, besides the gateway's own and GATEWAY_TRUSTED_KEYS. Repeatable.",
)
@click.option(
    "--allow-unsigned-before",
    type=click.IntRange(min=1),
    metavar="SEQ",
    help="Accept unsigned events below SEQ: a log written before record signatures existed.",
)
@click.option(
    "--unsafe-accept-unpinned-checkpoint",
    is_flag=True,
    help="UNSAFE: accept a checkpoint signed by no trusted key (or unsigned); says so.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def audit_verify(
    ctx: click.Context,
    checkpoint_file: Path | None,
    public_key_files: tuple[Path, ...],
    allow_unsigned_before: int | None,
    unsafe_accept_unpinned_checkpoint: bool,
    fmt: str,
) -> None:
    """Recompute every hash, link and record signature and check each request's life;
    exit 0 if intact, 1 on any defect. Says which keys it trusted."""
    keys = [key for path in public_key_files for key in read_public_keys(path)]
    with (
        Auditing.open(settings_of(ctx)) as auditing,
        Progress("verifying", threshold=PROGRESS_THRESHOLD) as progress,
    ):
        report = auditing.verify(
            checkpoint=checkpoint_file,
            trusted_keys=keys,
            allow_unsigned_before=allow_unsigned_before,
            unsafe_accept_unpinned_checkpoint=unsafe_accept_unpinned_checkpoint,
            progress=progress,
        )
    _print_report(report, fmt)
    if not report.ok:
        raise CheckFailed()


@audit_group.command("checkpoint")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--unsigned", is_flag=True, help="Write an unsigned head (no key configured).")
@click.pass_context
def audit_checkpoint(ctx: click.Context, output: Path | None, unsigned: bool) -> None:
    """Record a checkpoint and write the signed head (GATEWAY_CHECKPOINT_KEY)."""
    with Auditing.open(settings_of(ctx)) as auditing:
        head = auditing.checkpoint(unsigned=unsigned)
    with open_output(output) as out:
        out.write(checkpoint_text(head))


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
@click.pass_context
def audit_export(
    ctx: click.Context, /, fmt: str, output: Path | None, reviewer: str, **filters: Any
) -> None:
    """Export events (bodies exactly as hashed); the export is recorded as an event."""
    with Auditing.open(settings_of(ctx)) as auditing, open_output(output) as out:
        summary = auditing.export(
            out, "csv" if fmt == "csv" else "jsonl", EventFilter(**filters), reviewer=reviewer
        )
    click.echo(f"exported {summary.events} events; recorded as seq {summary.export_seq}.", err=True)
