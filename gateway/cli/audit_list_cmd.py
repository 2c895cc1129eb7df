"""`gateway audit list`: one entry per request, for a reviewer's terminal and for scripts.

    $ gateway audit list --status flagged --status alerted --until 2026-11-30
    $ gateway audit list --fingerprint 4f2a9c01 --format json

Each request takes two lines of at most 120 characters: seq, time, status, the model id
(never cut: a wrong model is often the finding) and the request id; then task, caller,
tokens, latency, cost, policy version and caller contract (these are cut, with a mark, when
too long). JSON and JSONL carry every field whole.
"""

from __future__ import annotations

from typing import Any

import click

from gateway._inputs import EXPERIMENT_CALLER
from gateway.cli._context import settings_of
from gateway.cli._render import echo_json, echo_jsonl, shown
from gateway.cli._selection import (
    experiments_left_out_line,
    filter_options,
    known_tasks_line,
    selection_text,
)
from gateway.evidence import (
    LISTED_STATUSES,
    Auditing,
    EventFilter,
    RequestSummary,
    fingerprint_prefix,
    wanted,
)

__all__ = ["list_command"]

ID_WIDTH = 36  # "req_" and 32 hex digits: the gateway's own request ids fit unpadded
SEQ_WIDTH = 11


@click.command("list")
@filter_options
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(LISTED_STATUSES),
    help="Only requests with this outcome (repeatable): alerted is any request with an "
    "answer alert (another model, region or context edit than its policy pinned).",
)
@click.option(
    "--fingerprint",
    help="Only requests run under this policy version (its fingerprint, or 6+ hex digits of it).",
)
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
def list_command(
    ctx: click.Context,
    /,
    statuses: tuple[str, ...],
    fingerprint: str | None,
    limit: int,
    everything: bool,
    include_experiments: bool,
    fmt: str,
    **filters: Any,
) -> None:
    """One entry per request: status (completed, flagged, failed, cancelled, rejected, cache
    hit, answer alert, integrity alert, incomplete, ...), model, request id, task, caller,
    tokens, latency, estimated cost (priced from the model catalog; "-" where no usage was
    recorded or no price is sourced), the policy version (its fingerprint's first 12 hex
    digits) and the caller contract. On a format-2 log, * marks a request with an event not
    yet linked by the integrator ("pending_integration" in JSON)."""
    prefix = fingerprint_prefix(fingerprint) if fingerprint is not None else None
    # Experiment samples are not production records: left out unless asked for.
    excluded = None if include_experiments else EXPERIMENT_CALLER
    selection = EventFilter(**filters, exclude_caller=excluded)
    limit_or_all = None if everything or not limit else limit
    by_row = bool(statuses) or prefix is not None
    with Auditing.open(settings_of(ctx)) as auditing:
        if by_row:  # a status is known once a request's events are read: filtered here
            rows = [
                r
                for r in auditing.requests(selection, limit=None)
                if wanted(r, statuses=statuses, fingerprint=prefix)
            ]
            total = len(rows)
            rows = rows[-limit_or_all:] if limit_or_all else rows
        else:
            rows = auditing.requests(selection, limit=limit_or_all)
            total = auditing.count_requests(selection) if limit_or_all is not None else len(rows)
        left_out = 0
        if excluded is not None and fmt == "table" and not by_row:
            left_out = auditing.count_requests(EventFilter(**filters)) - total
    if fmt == "json":
        echo_json([r.model_dump(mode="json") for r in rows])
    elif fmt == "jsonl":
        echo_jsonl(r.model_dump(mode="json") for r in rows)
    else:
        _print_table(rows)
        if len(rows) < total:
            click.echo(f"{len(rows)} of {total} (use --limit N or --all)")
        elif not rows:
            asked = {**filters, "status": statuses, "fingerprint": fingerprint}
            click.echo(f"no requests match{selection_text(asked)}", err=True)
            click.echo(known_tasks_line(settings_of(ctx)), err=True)
        if left_out:
            click.echo(experiments_left_out_line(left_out))


def _print_table(rows: list[RequestSummary]) -> None:
    model_width = max([5, *(len(shown(r.model or "-")) for r in rows)])
    pad = " " * SEQ_WIDTH
    click.echo(
        f"{'seq':>{SEQ_WIDTH}}  {'started (UTC)':19}  {'status':15}  "
        f"{'model':{model_width}}  request id"
    )
    click.echo(
        f"{pad}  {'task':22}  {'caller':18}  {'tokens in/out':>13}  {'latency':>9}  "
        f"{'cost (USD)':>10}  {'policy':12}  contract"
    )
    for r in rows:
        seqs = str(r.first_seq) if r.first_seq == r.last_seq else f"{r.first_seq}-{r.last_seq}"
        seqs += PENDING_MARK if r.pending_integration else ""
        click.echo(
            f"{seqs:>{SEQ_WIDTH}}  {r.started_at:%Y-%m-%d %H:%M:%S}  {_cell(r.status, 15)}  "
            f"{shown(r.model or '-'):{model_width}}  {shown(r.request_id)}"
        )
        click.echo(
            f"{pad}  {_cell(r.task, 22)}  {_cell(r.caller, 18)}  "
            f"{_tokens(r.input_tokens, r.output_tokens):>13}  {_latency(r.latency_ms):>9}  "
            f"{_request_cost(r.cost_usd):>10}  "
            f"{_cell(_short_fingerprint(r.policy_fingerprint), 12)}  {shown(r.contract or '-')}"
        )
        if r.label is not None:  # a derived policy's request (an experiment): its label
            click.echo(f"{pad}  label {_cell(r.label, 120 - SEQ_WIDTH - 8)}")
    if any(r.pending_integration for r in rows):
        click.echo(PENDING_LEGEND)


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
