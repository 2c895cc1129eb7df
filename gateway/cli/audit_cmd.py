"""`gateway audit`: list, show, verify, checkpoint and export the audit log.

    $ gateway audit list --task compliance_review --since 2026-11-01
    $ gateway audit verify --checkpoint head.json

`verify` exits 0 when the log is intact and 1 on any defect, naming the first bad seq.
Each command parses its options, calls :class:`gateway.evidence.Auditing` and renders.
"""

from __future__ import annotations

import csv
import getpass
import sys
from pathlib import Path
from typing import Any, cast

import click

from gateway.cli._context import settings_of
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
from gateway.cli.audit_show_cmd import show_command
from gateway.cli.integrate_cmd import integrate_command
from gateway.cli.verify_cmd import checkpoint_command, verify_command
from gateway.evidence import (
    Auditing,
    EventFilter,
    GroupBy,
    UsageReport,
    UsageRow,
)


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
audit_group.add_command(show_command)
audit_group.add_command(verify_command)
audit_group.add_command(checkpoint_command)
audit_group.add_command(integrate_command)
