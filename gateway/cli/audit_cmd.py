"""`gateway audit`: list, show, verify, checkpoint and export the audit log.

    $ gateway audit list --task compliance_review --since 2026-11-01
    $ gateway audit verify --checkpoint head.json

`verify` exits 0 when the log is intact and 1 on any defect, naming the first bad seq.
Each command parses its options, calls :class:`gateway.evidence.Auditing` and renders.
"""

from __future__ import annotations

import csv
import getpass
import json
import sys
from pathlib import Path
from typing import Any, cast

import click

from gateway.cli._context import settings_of
from gateway.cli._policy_history import approvals_text, version_json, when
from gateway.cli._render import (
    UNTIL_HELP,
    echo_json,
    open_output,
    parse_until,
    parse_when,
    shown,
)
from gateway.cli._selection import filter_options, known_tasks_line
from gateway.cli.audit_list_cmd import list_command
from gateway.cli.integrate_cmd import integrate_command
from gateway.cli.verify_cmd import checkpoint_command, verify_command
from gateway.evidence import (
    Auditing,
    Erasing,
    EventFilter,
    EventKind,
    GroupBy,
    PolicyRecords,
    RecordedContent,
    StoredEvent,
    UsageReport,
    UsageRow,
)
from gateway.policy import caller_parts, requested_keys


@click.group("audit")
def audit_group() -> None:
    """List, show, verify, checkpoint and export the audit log."""


@audit_group.command("usage")
@click.option(
    "--by", type=click.Choice(["caller", "task", "model"]), required=True, help="Group by this."
)
@click.option("--task", help="Only this task.")
@click.option("--caller", help="Only this calling service.")
@click.option("--since", callback=parse_when, help="From this UTC time (ISO 8601).")
@click.option("--until", callback=parse_until, help=UNTIL_HELP)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table")
@click.pass_context
def audit_usage(ctx: click.Context, /, by: str, fmt: str, **filters: Any) -> None:
    """Tokens (input, output, cache write, cache read) and cost per caller, task or model,
    from the usage recorded with each answer; priced from the model catalog, and "unpriced"
    where the catalog has no sourced price."""
    with Auditing.open(settings_of(ctx)) as auditing:
        report = auditing.usage(cast(GroupBy, by), EventFilter(**filters))
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([by, *USAGE_FIELDS])
        for row in (*report.rows, report.total):
            writer.writerow([row.key, *(_usage_value(row, f) for f in USAGE_FIELDS)])
    else:
        _print_usage(report)
        if not report.rows:
            click.echo(known_tasks_line(settings_of(ctx)), err=True)


USAGE_FIELDS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "cost_usd",
    "unpriced_requests",
    "contract",
)


def _usage_value(row: UsageRow, name: str) -> object:
    value = getattr(row, name)
    return "unpriced" if name == "cost_usd" and value is None else value


def _cost(row: UsageRow) -> str:
    if row.cost_usd is None:
        return "unpriced"
    cost = f"${row.cost_usd:,.4f}"
    return cost if row.priced else f"{cost} + {row.unpriced_requests} unpriced"


def _print_usage(report: UsageReport) -> None:
    if not report.rows:
        click.echo("no recorded usage matches", err=True)
        return
    width = max(len(report.by), *(len(shown(r.key)) for r in report.rows), 5)
    click.echo(
        f"{report.by:{width}}  {'requests':>8}  {'input':>12}  {'output':>12}  "
        f"{'cache write':>12}  {'cache read':>12}  {'contract':8}  cost (USD)"
    )
    for row in (*report.rows, report.total):
        click.echo(
            f"{shown(row.key):{width}}  {row.requests:>8,}  {row.input_tokens:>12,}  "
            f"{row.output_tokens:>12,}  {row.cache_write_tokens:>12,}  "
            f"{row.cache_read_tokens:>12,}  {row.contract:8}  {_cost(row)}"
        )
    unpriced = sorted(
        {m for r in report.rows if not r.priced for m in r.models} - set(report.price_sources)
    )
    if unpriced:
        click.echo(
            "unpriced: no sourced price in the model catalog for "
            + ", ".join(shown(m) for m in unpriced)
        )
    for model, sources in report.price_sources.items():
        first = next(iter(sources.values()))
        click.echo(f"prices of {shown(model)}: {shown(first)}")


@audit_group.command("show")
@click.argument("request_id")
@click.option(
    "--content",
    is_flag=True,
    help="Also print the system prompt, the messages and the answer, once the record checks "
    "out; the read is recorded as an ACCESS event (needs --reviewer).",
)
@click.option("--reviewer", help="Who is reading the content (recorded with the read).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def audit_show(
    ctx: click.Context, request_id: str, content: bool, reviewer: str | None, fmt: str
) -> None:
    """A request's whole life: intent, attempts, outcome or cache hit; with --content, what
    was asked and what came back."""
    if content and reviewer is None:
        raise click.UsageError("--content needs --reviewer NAME: every content read is recorded")
    if reviewer is not None and not content:
        raise click.UsageError("--reviewer is recorded with a content read: add --content")
    erased = None
    if reviewer is not None:
        with Erasing.open(settings_of(ctx)) as erasing:
            erased = erasing.erasure_of(request_id)
    with Auditing.open(settings_of(ctx)) as auditing:
        events = auditing.request_events(request_id)
        recorded = (
            auditing.read_content(request_id, reviewer=reviewer)
            if reviewer is not None and erased is None
            else None
        )
        reads = auditing.reads_of(request_id)
        pending = auditing.pending_integration(events)
        coverage = _coverage(auditing, events)
    first = events[0]
    fingerprint = next((e.policy_fingerprint for e in events if e.policy_fingerprint), None)
    version = None
    if fingerprint is not None and first.task is not None:
        with PolicyRecords.open(settings_of(ctx)) as records:
            version = records.version(first.task, fingerprint)
    if fmt == "json":
        rows = [
            {**e.json_row(), **({"pending_integration": True} if e.seq in pending else {})}
            for e in events
        ]
        out: dict[str, Any] = {"request_id": request_id, "coverage": coverage, "events": rows}
        out["policy_version"] = version_json(version) if version is not None else None
        if reads:
            out["reads"] = [_read_json(e) for e in reads]
        if recorded is not None:
            out["content"] = recorded.model_dump(mode="json")
        if erased is not None:
            out["content"] = {"erased": erased.model_dump(mode="json")}
        echo_json(out)
        return
    click.echo(
        f"request {shown(request_id)}  task {shown(first.task or '-')}  "
        f"caller {shown(first.caller or '-')}"
    )
    click.echo(f"policy {shown(fingerprint or '-')}")
    if version is not None:  # the version as a record: when it was in force, who approved it
        click.echo(
            f"  in use {when(version.first_used)} to {when(version.last_used)} UTC "
            f"({version.requests} request(s)); approved by {shown(approvals_text(version))}"
        )
    parts = ", ".join(coverage["caller_supplied"]) or "nothing"
    click.echo(f"contract {shown(coverage['contract'] or '-')}; caller-supplied: {shown(parts)}")
    for e in events:
        # Format 2: committed and signed, not yet linked into the chain by the integrator.
        mark = "  (pending integration)" if e.seq in pending else ""
        click.echo(
            f"  seq {e.seq:<8} {e.recorded_at:%Y-%m-%d %H:%M:%S.%f}  {shown(e.kind.value)}{mark}"
        )
        for key in sorted(e.data):
            value = shown(json.dumps(e.data[key], ensure_ascii=False))
            cut = f" [truncated, {len(value)} characters]" if len(value) > SHOW_CUT else ""
            click.echo(f"      {shown(key)}: {value[:SHOW_CUT]}{cut}")
        for name, digest in sorted(e.payload_digests.items()):
            click.echo(f"      payload {shown(name)}: {shown(digest)}")
    if reads:
        click.echo("content read by:")
        for e in reads:
            state = "shown" if e.data.get("shown") is True else "REFUSED"
            click.echo(
                f"  seq {e.seq:<8} {e.recorded_at:%Y-%m-%d %H:%M:%S}  "
                f"{shown(e.data.get('reviewer') or e.caller or '-')}  {state}"
            )
    if recorded is not None:
        _print_content(recorded)
    if erased is not None:
        click.echo(shown(erased.text()))


def _coverage(auditing: Auditing, events: list[StoredEvent]) -> dict[str, Any]:
    """The caller contract the request ran under, and the parts its caller brought (as its
    intent, or its refusal, recorded them)."""
    first = next((e for e in events if e.kind in (EventKind.REQUEST, EventKind.REJECTED)), None)
    fingerprint = first.policy_fingerprint if first is not None else None
    requested = requested_keys(first.data) if first is not None else ()
    return {"contract": auditing.contract(fingerprint), "caller_supplied": caller_parts(requested)}


SHOW_CUT = 200  # characters of one data value in text output; the rest is marked, never lost
INDENT = "    "  # content lines are indented, so no recorded text can pass for a heading


def _read_json(event: StoredEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "recorded_at": event.recorded_at.isoformat(),
        "reviewer": event.data.get("reviewer"),
        "shown": event.data.get("shown"),
        "read": event.data.get("read"),
    }


def _block_text(block: Any) -> str:
    if isinstance(block, dict) and isinstance(block.get("text"), str):
        return str(block["text"])
    return json.dumps(block, ensure_ascii=False, sort_keys=True)


def _content_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_block_text(b) for b in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _echo_block(text: str) -> None:
    for line in text.split("\n"):
        click.echo(f"{INDENT}{shown(line)}")


def _print_content(recorded: RecordedContent) -> None:
    seqs = ", ".join(str(s) for s in recorded.seqs)
    click.echo(
        f"content (record checked: seq {seqs}; this read is recorded as seq {recorded.access_seq})"
    )
    if recorded.served_from is not None:
        click.echo(f"  served from the recorded answer of {shown(recorded.served_from)}")
    click.echo("  system prompt:")
    _echo_block(_content_text(recorded.system) if recorded.system is not None else "(none)")
    for n, message in enumerate(recorded.messages, 1):
        role = message.get("role") if isinstance(message, dict) else None
        body = message.get("content") if isinstance(message, dict) else message
        click.echo(f"  message {n} ({shown(role or '?')}):")
        _echo_block(_content_text(body))
    model = f", model {shown(recorded.model)}" if recorded.model else ""
    click.echo(f"  answer ({shown(recorded.outcome)}{model}):")
    if recorded.answer is None:
        _echo_block("(no answer recorded)")
    else:
        _echo_block(recorded.answer)
    for block in recorded.answer_blocks:
        if not (isinstance(block, dict) and block.get("type") == "text"):
            click.echo(
                f"  answer block ({shown(block.get('type') if isinstance(block, dict) else '?')}):"
            )
            _echo_block(_block_text(block))


@audit_group.command("export")
@filter_options
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--reviewer",
    default=getpass.getuser,
    show_default="your login name",
    help="Who is exporting, recorded with the export.",
)
@click.option(
    "--with-content",
    is_flag=True,
    help="Add each request's system prompt, messages and answer (JSONL), once its record "
    "checks out; recorded as an ACCESS event naming --reviewer.",
)
@click.pass_context
def audit_export(
    ctx: click.Context,
    /,
    fmt: str,
    output: Path | None,
    reviewer: str,
    with_content: bool,
    **filters: Any,
) -> None:
    """Export events (bodies exactly as hashed, with record signatures); the export is
    recorded as an event, and a JSONL export ends with that event, signed, so `audit verify
    --export FILE --public-key KEY` can check the slice without the database."""
    if with_content and fmt != "jsonl":
        raise click.UsageError("--with-content writes JSONL: use --format jsonl.")
    with Auditing.open(settings_of(ctx)) as auditing, open_output(output) as out:
        summary = auditing.export(
            out,
            "csv" if fmt == "csv" else "jsonl",
            EventFilter(**filters),
            reviewer=reviewer,
            with_content=with_content,
        )
    click.echo(
        f"exported {summary.events} events up to seq {summary.upto_seq}; recorded as seq "
        f"{summary.export_seq}{' (content read recorded)' if with_content else ''}.",
        err=True,
    )


# Defined in their own module; added here so `gateway audit` lists them in one group.
audit_group.add_command(list_command)
audit_group.add_command(verify_command)
audit_group.add_command(checkpoint_command)
audit_group.add_command(integrate_command)
