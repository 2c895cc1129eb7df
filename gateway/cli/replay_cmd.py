"""`gateway replay`: verify, re-execute or migrate recorded requests.

    $ gateway replay req_4f2a...                       # --verify (the default): pass or fail
    $ gateway replay --task compliance_review --live --report replay.html
    $ gateway replay --task risk_report --model claude-opus-5-5 --live --format json

Exit codes: 0 done; 1 a verify check failed; 2 bad input (nothing recorded); 3 a live call
failed; 4 the audit database failed. Every run is recorded as REPLAY events.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from audit import AuditStore
from gateway.catalog import Catalog
from gateway.cli.audit_cmd import _when
from gateway.errors import ConfigurationError, InputError
from gateway.replay import (
    Mode,
    Outcome,
    PreparedRun,
    Replayer,
    ReplayReport,
    RequestReplay,
    Selection,
    Senders,
    render_html,
)
from gateway.settings import Settings

LIVE_CALL_FAILED_EXIT = 3

if TYPE_CHECKING:
    from gateway.providers.anthropic import AnthropicProvider


def _anthropic_factory(settings: Settings) -> Any:
    def build() -> AnthropicProvider:
        from gateway.providers.anthropic import AnthropicProvider  # the SDK is slow to import

        key = settings.anthropic_api_key
        if key is None or not key.get_secret_value():
            raise ConfigurationError(
                "this replay re-sends requests to Claude, but no Anthropic API key is set.",
                hint="Set ANTHROPIC_API_KEY, or replay with --verify (offline).",
            )
        return AnthropicProvider(
            api_key=key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            timeout_s=settings.request_timeout_s,
            max_attempts=settings.max_attempts,
            retry_after_cap_s=settings.retry_after_cap_s,
        )

    return build


@click.command("replay")
@click.argument("request_ids", nargs=-1)
@click.option("--verify", is_flag=True, help="Re-plan under the recorded policy (the default).")
@click.option("--live", is_flag=True, help="Re-send the recorded request and diff the answer.")
@click.option("--model", "model_id", metavar="ID", help="Re-plan on another model (migration).")
@click.option("--task", help="Only requests of this task.")
@click.option("--caller", help="Only requests from this calling service.")
@click.option("--since", callback=_when, help="From this UTC time (ISO 8601).")
@click.option("--until", callback=_when, help="Before this UTC time (ISO 8601).")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML report to this file.",
)
def replay_command(
    request_ids: tuple[str, ...],
    verify: bool,
    live: bool,
    model_id: str | None,
    fmt: str,
    report_path: Path | None,
    **filters: Any,
) -> None:
    """Verify, re-execute or migrate recorded requests (REQUEST_IDS or filters)."""
    if verify and (live or model_id):
        raise click.UsageError("--verify cannot be combined with --live or --model.")
    if report_path is not None and not report_path.resolve().parent.is_dir():
        raise InputError(f"cannot write the report: folder {str(report_path.parent)!r} is missing.")
    settings = Settings.from_env()
    catalog = Catalog.load(settings.catalog_override)
    selection = Selection(request_ids=request_ids, **filters)
    senders = Senders(anthropic=_anthropic_factory(settings))
    try:
        with AuditStore.open(settings.database_url, settings.durability.value) as store:
            replayer = Replayer(store, catalog, senders)
            prepared = replayer.prepare(selection, live=live, model=model_id)
            report = _run(replayer, prepared)
    finally:
        senders.close()
    _print(report, fmt)
    if report_path is not None:
        _write_report(report_path, report)
    if report.any_failed:
        sys.exit(1 if report.summary.mode is Mode.VERIFY else LIVE_CALL_FAILED_EXIT)


def _run(replayer: Replayer, prepared: PreparedRun) -> ReplayReport:
    total = len(prepared.requests)
    if total == 0:
        return replayer.run(prepared)
    with click.progressbar(length=total, label="replaying", file=sys.stderr) as bar:
        return replayer.run(prepared, progress=lambda _row: bar.update(1))


def _print(report: ReplayReport, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return
    if fmt == "jsonl":
        click.echo(json.dumps({"summary": report.summary.model_dump(mode="json")}))
        for row in report.requests:
            click.echo(json.dumps(row.model_dump(mode="json"), ensure_ascii=False))
        return
    click.echo(report.summary.line())
    click.echo(
        f"{'seq':>8}  {'outcome':9}  {'sim':>5}  {'task':22}  {'model':26}  request / reason"
    )
    for row in report.requests:
        click.echo(_table_row(row))


def _table_row(row: RequestReplay) -> str:
    similarity = "" if row.similarity is None else f"{row.similarity:.2f}"
    model = row.target_model or row.model_id or "-"
    line = (
        f"{row.seq:>8}  {row.outcome.value:9}  {similarity:>5}  {(row.task or '-')[:22]:22}  "
        f"{model[:26]:26}  {row.request_id}"
    )
    if row.reason and row.outcome is not Outcome.IDENTICAL:
        line += f"\n{'':>10}{row.reason}"
    return line


def _write_report(path: Path, report: ReplayReport) -> None:
    try:
        path.write_text(render_html(report), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the report {str(path)!r}: {exc.strerror}.") from None
    click.echo(f"report written to {path}", err=True)
