"""`gateway evidence REGIME`: one regulator's question answered as a folder of evidence.

    $ gateway evidence dora --from 2026-09-01 --to 2026-11-30 -o packs/dora-q3 --reviewer a.auditor
    $ gateway evidence --list

Parses, calls gateway.packs, renders: the pack's verdict per item on stdout, where it went
on stderr. Exit 0 when every checked item passes, 1 when one fails (the pack is written
either way: a failing pack is evidence too).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import click

from gateway.cli._boundary import CheckFailed
from gateway.cli._context import settings_of
from gateway.cli._render import echo_json, shown
from gateway.packs import REGIMES, build_pack


def _day(value: str | None, flag: str) -> date:
    if value is None:
        raise click.UsageError(f"{flag} DATE is required (YYYY-MM-DD, UTC).")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.UsageError(f"{flag} {value!r} is not a date: write YYYY-MM-DD.") from None


@click.command("evidence")
@click.argument("regime", required=False, metavar="REGIME", type=click.Choice(list(REGIMES)))
@click.option("--from", "first", metavar="DATE", help="First day of the period (UTC).")
@click.option("--to", "last", metavar="DATE", help="Last day of the period (UTC, included).")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path))
@click.option("--reviewer", help="Who builds the pack (recorded with it).")
@click.option(
    "--with-content",
    is_flag=True,
    help="Put each request's prompt and answer in the export, with the signed evidence that "
    "checks them (recorded as a content read by --reviewer).",
)
@click.option("--list", "show_list", is_flag=True, help="List the regimes and exit.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def evidence_command(
    ctx: click.Context,
    regime: str | None,
    first: str | None,
    last: str | None,
    output: Path | None,
    reviewer: str | None,
    with_content: bool,
    show_list: bool,
    fmt: str,
) -> None:
    """Build REGIME's evidence pack for a period: an HTML summary (what the regime asks,
    pass or fail per item with counts and dates), its JSON, the period's export, a signed
    checkpoint and receipts, the public keys and the standalone verifier. Recorded as an
    event. REGIME: sec-17a-4, dora, ai-act, finra-supervision, model-inventory."""
    if show_list:
        listed = [
            {"regime": r.key, "title": r.title, "sources": list(r.sources)}
            for r in REGIMES.values()
        ]
        if fmt == "json":
            echo_json(listed)
        else:
            for r in listed:
                click.echo(f"{r['regime']:<18} {r['title']}")
        return
    if regime is None or output is None or reviewer is None:
        raise click.UsageError("give REGIME, --from, --to, -o DIR and --reviewer NAME.")
    result = build_pack(
        settings_of(ctx),
        regime,
        _day(first, "--from"),
        _day(last, "--to"),
        output,
        reviewer=reviewer,
        with_content=with_content,
    )
    items = result.summary["items"]
    if fmt == "json":
        echo_json(result.summary)
    else:
        for item in items:
            click.echo(f"{item['status'].upper():<6} {item['key']:<18} {shown(item['evidence'])}")
    click.echo(
        f"evidence pack written to {shown(result.folder)} (index.html), recorded at seq "
        f"{result.recorded_seq}",
        err=True,
    )
    if any(item["status"] == "fail" for item in items):
        raise CheckFailed()
