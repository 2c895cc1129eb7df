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

from gateway._inputs import EXPERIMENT_CALLER
from gateway.catalog import Catalog
from gateway.cli._context import settings_of
from gateway.cli._render import (
    echo_json,
    echo_jsonl,
    open_output,
    parse_when,
    shown,
)
from gateway.cli.integrate_cmd import integrate_command
from gateway.cli.verify_cmd import checkpoint_command, verify_command
from gateway.errors import GatewayError
from gateway.evidence import (
    Auditing,
    Erasing,
    EventFilter,
    EventKind,
    GroupBy,
    RecordedContent,
    StoredEvent,
    UsageReport,
    UsageRow,
)
from gateway.policy import PolicySet, caller_parts
from gateway.settings import Settings


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
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="The newest N requests (0: all).",
)
@click.option("--all", "everything", is_flag=True, help="Every matching request (no limit).")
@click.option(
    "--include-experiments",
    is_flag=True,
    help="Also list the experiment runner's samples (left out by default).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table")
@click.pass_context
def audit_list(
    ctx: click.Context,
    /,
    limit: int,
    everything: bool,
    include_experiments: bool,
    fmt: str,
    **filters: Any,
) -> None:
    """One row per request: status (completed, flagged, failed, cancelled, rejected, cache
    hit, integrity alert, incomplete, ...), model, tokens, latency, estimated cost (priced
    from the model catalog; "-" where no usage was recorded or no price is sourced) and the
    policy version (its fingerprint's first 12 hex digits).
    On a format-2 log, * marks a request with an event not yet linked by the integrator
    ("pending_integration" in JSON)."""
    # Experiment samples are not production records: left out unless asked for.
    excluded = None if include_experiments else EXPERIMENT_CALLER
    selection = EventFilter(**filters, exclude_caller=excluded)
    limit_or_all = None if everything or not limit else limit
    with Auditing.open(settings_of(ctx)) as auditing:
        rows = auditing.requests(selection, limit=limit_or_all)
        total = auditing.count_requests(selection) if limit_or_all is not None else len(rows)
        left_out = 0
        if excluded is not None and fmt == "table":
            left_out = auditing.count_requests(EventFilter(**filters)) - total
    if fmt == "json":
        echo_json([r.model_dump(mode="json") for r in rows])
    elif fmt == "jsonl":
        echo_jsonl(r.model_dump(mode="json") for r in rows)
    else:
        click.echo(
            f"{'seq':>13}  {'started (UTC)':19}  {'status':15}  {'task':22}  {'label':22}  "
            f"{'caller':18}  {'contract':8}  {'model':20}  {'tokens in/out':>13}  {'latency':>9}  "
            f"{'cost (USD)':>10}  {'policy':12}  id"
        )
        for r in rows:
            seqs = str(r.first_seq) if r.first_seq == r.last_seq else f"{r.first_seq}-{r.last_seq}"
            seqs += PENDING_MARK if r.pending_integration else ""
            click.echo(
                f"{seqs:>13}  {r.started_at:%Y-%m-%d %H:%M:%S}  {_cell(r.status, 15)}  "
                f"{_cell(r.task, 22)}  {_cell(r.label, 22)}  {_cell(r.caller, 18)}  "
                f"{_cell(r.contract, 8)}  {_cell(r.model, 20)}  "
                f"{_tokens(r.input_tokens, r.output_tokens):>13}  "
                f"{_latency(r.latency_ms):>9}  {_request_cost(r.cost_usd):>10}  "
                f"{_cell(_short_fingerprint(r.policy_fingerprint), 12)}  {shown(r.request_id)}"
            )
        if any(r.pending_integration for r in rows):
            click.echo(PENDING_LEGEND)
        if len(rows) < total:
            click.echo(f"{len(rows)} of {total} (use --limit N or --all)")
        elif not rows:
            click.echo(f"no requests match{_selection_text(filters)}", err=True)
            click.echo(known_tasks_line(settings_of(ctx)), err=True)
        if left_out:
            click.echo(experiments_left_out_line(left_out))


def _short_fingerprint(fingerprint: str | None) -> str | None:
    """The first 12 hex digits of a policy fingerprint: enough to tell versions apart in a
    listing (`policy show`, `audit show` and JSON give it whole)."""
    return fingerprint.removeprefix("sha256:")[:12] if fingerprint else None


# Format 2: a request with an event committed and signed but not yet linked by the integrator.
PENDING_MARK = "*"
PENDING_LEGEND = (
    f"{PENDING_MARK} pending integration: not yet linked by `gateway audit integrate`; no "
    "receipt until its next checkpoint (`gateway audit show ID` marks the events)"
)


def experiments_left_out_line(count: int) -> str:
    """The footer of a selection that left experiment samples out (audit list, replay)."""
    return (
        f"{count} experiment request(s) matching the filters left out (use --include-experiments)"
    )


def _selection_text(filters: dict[str, Any]) -> str:
    given = {k: v for k, v in filters.items() if v is not None}
    return (" " + " ".join(f"--{k} {shown(v)}" for k, v in given.items())) if given else ""


def known_tasks_line(settings: Settings) -> str:
    """The tasks a selection could name: those of the policy folder, said when a selection
    is empty (a misspelt --task is the usual cause)."""
    try:
        tasks = PolicySet.load(settings.policy_dir, Catalog.load(settings.catalog_override)).tasks()
    except GatewayError:
        tasks = []
    if not tasks:
        return f"known tasks: none found in {shown(settings.policy_dir)}"
    return f"known tasks (in {shown(settings.policy_dir)}): {', '.join(shown(t) for t in tasks)}"


def _cell(value: str | None, width: int) -> str:
    # Escaped first, then cut, with a mark: a cut never lets a raw character through.
    text = shown(value or "-")
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{text:{width}}"


def _tokens(given: int | None, got: int | None) -> str:
    if given is None and got is None:
        return "-"
    return f"{'-' if given is None else given}/{'-' if got is None else got}"


def _latency(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:,.0f} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"


def _request_cost(usd: float | None) -> str:
    # "-" for no usage or no sourced price: never a 0 that nobody priced.
    return "-" if usd is None else f"${usd:,.4f}"


@audit_group.command("usage")
@click.option(
    "--by", type=click.Choice(["caller", "task", "model"]), required=True, help="Group by this."
)
@click.option("--task", help="Only this task.")
@click.option("--caller", help="Only this calling service.")
@click.option("--since", callback=parse_when, help="From this UTC time (ISO 8601).")
@click.option("--until", callback=parse_when, help="Before this UTC time (ISO 8601).")
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
    if fmt == "json":
        rows = [
            {**e.json_row(), **({"pending_integration": True} if e.seq in pending else {})}
            for e in events
        ]
        out: dict[str, Any] = {"request_id": request_id, "coverage": coverage, "events": rows}
        if reads:
            out["reads"] = [_read_json(e) for e in reads]
        if recorded is not None:
            out["content"] = recorded.model_dump(mode="json")
        if erased is not None:
            out["content"] = {"erased": erased.model_dump(mode="json")}
        echo_json(out)
        return
    first = events[0]
    click.echo(
        f"request {shown(request_id)}  task {shown(first.task or '-')}  "
        f"caller {shown(first.caller or '-')}"
    )
    fingerprint = next((e.policy_fingerprint for e in events if e.policy_fingerprint), None)
    click.echo(f"policy {shown(fingerprint or '-')}")
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
    requested = first.data.get("requested") if first is not None else None
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
@_filter_options
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
audit_group.add_command(verify_command)
audit_group.add_command(checkpoint_command)
audit_group.add_command(integrate_command)
