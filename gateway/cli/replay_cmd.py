"""`gateway replay`: verify, re-execute or migrate recorded requests.

    $ gateway replay req_4f2a...                       # --verify (the default): pass or fail
    $ gateway replay --task compliance_review --live --report replay.html
    $ gateway replay --task risk_report --model claude-opus-5-5 --live --format json
    $ gateway replay --task risk_report --model bedrock:eu.anthropic.claude-sonnet-4-6@eu-central-1
    $ gateway replay --task compliance_review --policies proposed/ --live   # a policy edit

Exit codes: 0 done; 1 a verify check failed (or, with --fail-on-refused, a request the new
model or candidate policies would refuse); 2 bad input (nothing recorded); 3 a live call
failed; 4 the audit database failed. Every run is recorded as REPLAY events. Every report
says when it was made, by whom (--operator), from which store and with which gateway version.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import click

from gateway.cli._boundary import CheckFailed, ExitCode
from gateway.cli._context import settings_of
from gateway.cli._render import UNTIL_HELP, Progress, parse_until, parse_when, shown
from gateway.cli._selection import experiments_left_out_line, known_tasks_line
from gateway.errors import InputError
from gateway.replay import (
    SIMILARITY_MEANS,
    AnswerSide,
    LiveTotals,
    Mode,
    Outcome,
    PreparedRun,
    ReplayReport,
    ReplaySession,
    ReportContext,
    RequestReplay,
    RowSpool,
    Selection,
    flip_lines,
    identical_means,
    selection_text,
    versions_line,
    write_html,
)

TABLE_TEXT = 200  # characters of each answer in the table (the report holds more)


@click.command("replay")
@click.argument("request_ids", nargs=-1)
@click.option("--verify", is_flag=True, help="Re-plan under the recorded policy (the default).")
@click.option("--live", is_flag=True, help="Re-send the recorded request and diff the answer.")
@click.option(
    "--model",
    "model_id",
    metavar="TARGET",
    help="Re-plan on another model (migration): its id, or TRANSPORT:ID@REGION on a cloud "
    "(bedrock:eu.anthropic.claude-sonnet-4-6@eu-central-1, vertex:claude-sonnet-4-6@europe-west1).",
)
@click.option(
    "--policies",
    "policies",
    type=click.Path(file_okay=False, path_type=Path),
    help="Re-plan under this candidate policy folder (a proposed change) instead of the "
    "recorded policy; with --live, send and compare the answers.",
)
@click.option("--task", help="Only requests of this task.")
@click.option("--caller", help="Only requests from this calling service.")
@click.option("--since", callback=parse_when, help="From this UTC time (ISO 8601).")
@click.option("--until", callback=parse_until, help=UNTIL_HELP)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--all", "everything", is_flag=True, help="Every matching request (no limit).")
@click.option(
    "--include-experiments",
    is_flag=True,
    help="Also select the experiment runner's samples (left out of filters by default).",
)
@click.option(
    "--include-failed",
    is_flag=True,
    help="--live: also re-send requests whose original call failed (left out and counted by "
    "default: their answers have nothing to be compared with).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML report to this file.",
)
@click.option(
    "--operator",
    default=getpass.getuser,
    show_default="your login name",
    help="Who runs this replay: named in the report and recorded as its events' caller.",
)
@click.option(
    "--fail-on-refused",
    is_flag=True,
    help="Exit 1 when the new model (--model) or the candidate policies (--policies) would "
    "refuse any request: gate a migration or a policy change in CI.",
)
def replay_command(
    request_ids: tuple[str, ...],
    verify: bool,
    live: bool,
    model_id: str | None,
    policies: Path | None,
    fmt: str,
    report_path: Path | None,
    operator: str,
    fail_on_refused: bool,
    everything: bool,
    **filters: Any,
) -> None:
    """Verify, re-execute or migrate recorded requests (REQUEST_IDS or filters)."""
    if verify and (live or model_id or policies):
        raise click.UsageError("--verify cannot be combined with --live, --model or --policies.")
    if report_path is not None and not report_path.resolve().parent.is_dir():
        raise InputError(f"cannot write the report: folder {str(report_path.parent)!r} is missing.")
    if fail_on_refused and model_id is None and policies is None:
        raise click.UsageError(
            "--fail-on-refused applies to a migration: add --model ID or --policies DIR."
        )
    if everything:
        filters["limit"] = None
    selection = Selection(request_ids=request_ids, **filters)
    settings = settings_of()
    # Every run's rows go to a spool file as they are recorded and are printed (and put in the
    # report) after the summary, so memory stays flat however many requests it covers.
    with ReplaySession.open(settings, operator=operator) as session, RowSpool() as spool:
        prepared = session.prepare(selection, live=live, model=model_id, policies=policies)
        report = _run(session, prepared, spool)
        context = ReportContext.made(
            operator, settings.database_url_masked, selection_text(selection)
        )
        report = report.model_copy(update={"context": context})
        _print(report, fmt, spool)
        if report_path is not None:
            _write_report(report_path, report, spool)
    if report.experiments_left_out and fmt == "table":
        click.echo(experiments_left_out_line(report.experiments_left_out))
    if report.failed_originals_left_out and fmt == "table":
        click.echo(
            f"{report.failed_originals_left_out} request(s) whose original call failed left "
            "out, not sent (use --include-failed)"
        )
    if not report.summary.total:
        click.echo("no recorded requests match the selection", err=True)
        click.echo(known_tasks_line(settings), err=True)
    if report.any_failed:
        raise CheckFailed(
            ExitCode.CHECK_FAILED if report.summary.mode is Mode.VERIFY else ExitCode.UPSTREAM
        )
    if fail_on_refused and report.any_refused:
        refused = report.summary.counts.get(Outcome.REFUSED.value, 0)
        where = shown(model_id) if policies is None else f"the policies in {str(policies)!r}"
        click.echo(f"{refused} request(s) refused on {where} (--fail-on-refused)", err=True)
        raise CheckFailed(ExitCode.CHECK_FAILED)


def _run(session: ReplaySession, prepared: PreparedRun, spool: RowSpool) -> ReplayReport:
    """The run's report (its summary and per-task tallies); each row goes to ``spool``."""
    with Progress("replaying") as progress:
        total = len(prepared.requests)

        def advance(row: RequestReplay) -> None:
            spool.add(row)
            progress(spool.count, total)

        return session.run(prepared, progress=advance, keep_rows=False)


def _print(report: ReplayReport, fmt: str, spool: RowSpool) -> None:
    if fmt == "json":
        _print_json(report, spool)
        return
    if fmt == "jsonl":
        head = {
            "summary": report.summary.model_dump(mode="json"),
            "title": report.title,
            "context": report.context.model_dump(mode="json") if report.context else None,
        }
        click.echo(json.dumps(head, ensure_ascii=False))
        for row in spool.rows():
            click.echo(json.dumps(row.model_dump(mode="json"), ensure_ascii=False))
        return
    migration = report.summary.mode.replans
    click.echo(shown(report.summary.line()))
    click.echo(shown(report.title))
    if report.context is not None:
        click.echo(shown(report.context.line()))
        if report.context.selection:
            click.echo(f"selection: {shown(report.context.selection)}")
    if report.candidate is not None:
        click.echo(f"candidate policies: {shown(versions_line(report.candidate_versions))}")
    spend = report.spend_text()
    if spend is not None:
        click.echo(shown(spend))
    for line in flip_lines(report.by_task()):  # what a go/no-go turns on, before any row
        click.echo(shown(line))
    if migration:
        _print_tasks(report)
    elif report.summary.mode is Mode.LIVE:
        _print_live_totals(report)
    click.echo(
        f"{'seq':>8}  {'outcome':9}  {'sim':>5}  {'task':22}  {'model':26}  request / reason"
    )
    for row in spool.rows():
        click.echo(_table_row(row, reason=not migration))
        for name, side in (("recorded", row.recorded_answer), ("replayed", row.replayed_answer)):
            if side is not None:
                click.echo(_answer_line(name, side))


def _print_json(report: ReplayReport, spool: RowSpool) -> None:
    """One JSON document, as ``echo_json`` would print it with every row in ``requests``,
    written row by row."""
    data = report.model_dump(mode="json", exclude={"tasks"})
    data["title"] = report.title
    data["tasks"] = [t.model_dump(mode="json") for t in report.by_task()]
    head, tail = json.dumps(data, indent=2, ensure_ascii=False).split('"requests": []', 1)
    click.echo(head + '"requests": [', nl=False)
    for n, row in enumerate(spool.rows()):
        text = json.dumps(row.model_dump(mode="json"), indent=2, ensure_ascii=False)
        click.echo(("," if n else "") + "\n    " + text.replace("\n", "\n    "), nl=False)
    click.echo(("\n  ]" if spool.count else "]") + tail)


def _answer_line(name: str, side: AnswerSide) -> str:
    text = side.excerpt(TABLE_TEXT)
    return (
        f"{'':>10}{name} ({shown(side.model or '-')}, {side.latency_text}, "
        f"{side.cost_text}): {shown(text)}"
    )


def _print_live_totals(report: ReplayReport) -> None:
    click.echo(f"note: {SIMILARITY_MEANS}")
    for t in report.by_task():
        if t.live is not None:
            click.echo(f"task {shown(t.task)}: {_live_line(t.live)}")


def _live_line(live: LiveTotals) -> str:
    similarity = "-" if live.mean_similarity is None else f"{live.mean_similarity:.2f}"
    return (
        f"{live.compared} answer pair(s), mean similarity {similarity}; recorded: mean "
        f"{live.recorded.latency_text}, {live.recorded.cost_text}; replayed: mean "
        f"{live.replayed.latency_text}, {live.replayed.cost_text}"
    )


def _print_tasks(report: ReplayReport) -> None:
    click.echo(f"note: {identical_means(report.summary.mode)}")
    for t in report.by_task():
        counts = ", ".join(f"{n} {k}" for k, n in t.counts.items())
        click.echo(f"task {shown(t.task)}: {t.total} request(s): {counts}")
        for title, items in (
            ("finding", t.findings),
            ("reason", t.reasons),
            ("request change", t.request_changes),
            ("policy version", t.policy_versions),
        ):
            for c in items:
                click.echo(
                    f"  {title} ({c.count} request{'s' if c.count != 1 else ''}): {shown(c.text)}"
                )
        if t.live is not None:
            click.echo(f"  answers: {_live_line(t.live)}")
    if any(t.live is not None for t in report.by_task()):
        click.echo(f"note: {SIMILARITY_MEANS}")


def _table_row(row: RequestReplay, *, reason: bool = True) -> str:
    similarity = "" if row.similarity is None else f"{row.similarity:.2f}"
    model = row.target_model or row.model_id or "-"
    task = shown(row.task or "-")[:22]
    line = (
        f"{row.seq:>8}  {shown(row.outcome.value):9}  {similarity:>5}  {task:22}  "
        f"{shown(model)[:26]:26}  {shown(row.request_id)}"
    )
    if reason and row.reason and row.outcome is not Outcome.IDENTICAL:
        line += f"\n{'':>10}{shown(row.reason)}"
    return line


def _write_report(path: Path, report: ReplayReport, spool: RowSpool) -> None:
    try:
        with path.open("w", encoding="utf-8") as out:
            write_html(out, report, spool.rows)
    except OSError as exc:
        raise InputError(f"cannot write the report {str(path)!r}: {exc.strerror}.") from None
    click.echo(f"report written to {path}", err=True)
