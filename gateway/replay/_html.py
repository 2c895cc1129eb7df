"""A self-contained HTML report of a replay run: the summary, then each request with its diff.

    Path("replay.html").write_text(render_html(report), encoding="utf-8")
    write_html(file, report, spool.rows)   # a run whose rows were not kept in memory

No scripts, no external resources; every value is escaped, because response text is
untrusted (a model can be made to write ``<script>``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from html import escape
from typing import IO

from gateway.replay._answers import AnswerSide, LiveTotals
from gateway.replay._flips import flips_html
from gateway.replay._model import (
    SIMILARITY_MEANS,
    Counted,
    FieldChange,
    ReplayReport,
    RequestReplay,
    TaskSummary,
    identical_means,
    versions_line,
)

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em; color: #1b1b1b; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; white-space: pre-wrap; }
.passed, .identical { color: #1a7f37; } .failed, .refused { color: #b42318; }
.differing { color: #9a6700; } .skipped { color: #57606a; }
.add { color: #1a7f37; } .del { color: #b42318; } .hunk { color: #0550ae; }
section { border-top: 1px solid #ddd; margin-top: 1.5em; }
.answers { table-layout: fixed; width: 100%; } .answers td { width: 50%; }
.answers pre { max-height: 24em; overflow-y: auto; } .cut { color: #9a6700; }
.context { color: #444; } .note { background: #fff8e1; border: 1px solid #e0c36a; padding: 6px; }
@media print { section, table { break-inside: avoid; } }
"""


def render_html(report: ReplayReport) -> str:
    """The report of the rows ``report`` holds."""
    out = io.StringIO()
    write_html(out, report, lambda: report.requests)
    return out.getvalue()


def write_html(
    out: IO[str], report: ReplayReport, rows: Callable[[], Iterable[RequestReplay]]
) -> None:
    """Write the report to ``out``; ``rows()`` gives the run's rows, and is called once per
    part that lists them (a spool on disk: the rows are never all in memory)."""
    s = report.summary
    migration = s.mode.replans
    counts = "".join(
        f"<tr><th class='{escape(k)}'>{escape(k)}</th><td>{v}</td></tr>"
        for k, v in s.counts.items()
    )
    context = (
        f"<p class='context' id='context'>M{escape(report.context.line()[1:])}.</p>"
        if report.context is not None
        else ""
    )
    if report.context is not None and report.context.selection:
        context += (
            f"<p class='context' id='selection'>Selection: {escape(report.context.selection)}.</p>"
        )
    if report.candidate is not None:
        versions = versions_line(report.candidate_versions)
        context += f"<p class='context' id='candidate'>Candidate policies: {escape(versions)}.</p>"
    if report.spend_text() is not None:
        context += f"<p class='context' id='spend'>{escape(str(report.spend_text()))}.</p>"
    by_task = report.by_task()
    live = any(t.live is not None for t in by_task)
    note = f"<p class='note'>{escape(identical_means(s.mode))}</p>" if migration else ""
    if live:
        note += f"<p class='note' id='similarity-note'>{escape(SIMILARITY_MEANS)}</p>"
    tasks = _by_task(by_task) if migration or live else ""
    reason_head = "" if migration else "<th>reason</th>"
    out.write(
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">"
        f"<title>{escape(report.title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{escape(report.title)}</h1>{context}{flips_html(by_task)}"
        f"<p>Run <code>{escape(s.run_id)}</code>, {s.total} request(s).</p>"
        f"<table id='summary'>{counts}</table>{note}{tasks}"
        "<table id='requests'><tr><th>seq</th><th>request</th><th>task</th><th>model</th>"
        f"<th>outcome</th><th>similarity</th>{reason_head}</tr>"
    )
    for r in rows():
        out.write(_overview_row(r, reason=not migration))
    out.write("</table>")
    # A migration's findings and reasons are the same for every request of a task: they are
    # said once per task, with a count, rather than once per request.
    if s.mode.sends or not migration:
        for r in rows():
            out.write(_section(r, findings=not migration))
    out.write("</body></html>\n")


def _counted(title: str, items: tuple[Counted, ...]) -> str:
    if not items:
        return ""
    lis = "".join(
        f"<li>{escape(c.text)} <strong>({c.count} request{'s' if c.count != 1 else ''})"
        "</strong></li>"
        for c in items
    )
    return f"<p>{escape(title)}:</p><ul>{lis}</ul>"


def _by_task(tasks: tuple[TaskSummary, ...]) -> str:
    parts = ["<section id='tasks'><h2>By task</h2>"]
    for t in tasks:
        counts = ", ".join(f"{n} {escape(k)}" for k, n in t.counts.items())
        parts.append(
            f"<h3>{escape(t.task)}: {t.total} request(s): {counts}</h3>"
            + _counted("Review findings on the new model", t.findings)
            + _counted("Reasons", t.reasons)
            + _counted("Request changes besides the model id", t.request_changes)
            + _counted("Policy versions (recorded -> replayed)", t.policy_versions)
            + (_live_totals(t.live) if t.live is not None else "")
        )
    parts.append("</section>")
    return "".join(parts)


def _overview_row(r: RequestReplay, *, reason: bool = True) -> str:
    similarity = "" if r.similarity is None else f"{r.similarity:.3f}"
    model = r.target_model or r.model_id or ""
    request = (
        escape(r.request_id)
        if r.mode.replans and not r.mode.sends
        else f"<a href='#{escape(r.request_id)}'>{escape(r.request_id)}</a>"
    )
    reason_cell = f"<td>{escape(r.reason or '')}</td>" if reason else ""
    return (
        f"<tr><td>{r.seq}</td><td>{request}"
        f"</td><td>{escape(r.task or '')}</td><td>{escape(model)}</td>"
        f"<td class='{escape(r.outcome.value)}'>{escape(r.outcome.value)}</td>"
        f"<td>{similarity}</td>{reason_cell}</tr>"
    )


def _section(r: RequestReplay, *, findings: bool = True) -> str:
    parts = [
        f"<section id='{escape(r.request_id)}'><h2>{escape(r.request_id)} "
        f"<span class='{escape(r.outcome.value)}'>{escape(r.outcome.value)}</span></h2>",
        f"<p>seq {r.seq}, task {escape(r.task or '-')}, caller {escape(r.caller or '-')}, "
        f"recorded model {escape(r.model_id or '-')}"
        + (f", replayed on {escape(r.target_model)}" if r.target_model else "")
        + (f", replay event seq {r.replay_seq}" if r.replay_seq else "")
        + "</p>",
    ]
    if r.reason:
        parts.append(f"<p><strong>Reason:</strong> {escape(r.reason)}</p>")
    if r.checks:
        rows = "".join(
            f"<tr><td>{escape(c.name)}</td><td class='{'passed' if c.ok else 'failed'}'>"
            f"{'ok' if c.ok else 'FAILED'}</td><td>{escape(c.detail)}</td></tr>"
            for c in r.checks
        )
        parts.append(f"<h3>Checks</h3><table>{rows}</table>")
    if r.findings and findings:
        items = "".join(f"<li>{escape(f)}</li>" for f in r.findings)
        parts.append(f"<h3>Review findings on the new model</h3><ul>{items}</ul>")
    if r.request_changes:
        parts.append("<h3>Request changes</h3>" + _changes(r.request_changes))
    if r.json_changes:
        parts.append("<h3>Answer field changes</h3>" + _changes(r.json_changes))
    if r.recorded_answer is not None or r.replayed_answer is not None:
        parts.append(_side_by_side(r))
    if r.text_diff:
        parts.append("<h3>Answer text diff</h3><pre>" + _diff(r.text_diff) + "</pre>")
    parts.append("</section>")
    return "".join(parts)


def _side_by_side(r: RequestReplay) -> str:
    sides = (r.recorded_answer, r.replayed_answer)
    head = "".join(
        f"<th>{name} answer ({escape(s.model or '-') if s else '-'})</th>"
        for name, s in zip(("Recorded", "Replayed"), sides, strict=True)
    )
    texts = "".join(f"<td>{_answer_text(s)}</td>" for s in sides)
    similarity = "-" if r.similarity is None else f"{r.similarity:.3f}"
    facts = "".join(
        f"<tr><th>{name}</th>" + "".join(f"<td>{_fact(s, name)}</td>" for s in sides) + "</tr>"
        for name in ("latency", "tokens in / out", "estimated cost")
    )
    return (
        f"<h3>Answers side by side (similarity {similarity})</h3>"
        f"<table class='answers'><tr>{head}</tr><tr>{texts}</tr></table>"
        f"<table class='answer-facts'><tr><th></th><th>recorded</th><th>replayed</th></tr>"
        f"{facts}</table>"
    )


def _fact(side: AnswerSide | None, name: str) -> str:
    if side is None:
        return "-"
    if name == "latency":
        return escape(side.latency_text)
    if name == "estimated cost":
        return escape(side.cost_text)
    return f"{_n(side.input_tokens)} / {_n(side.output_tokens)}"


def _answer_text(side: AnswerSide | None) -> str:
    if side is None:
        return "<p>no answer</p>"
    if not side.truncated_chars:
        return f"<pre>{escape(side.text)}</pre>"
    kept = side.length - side.truncated_chars
    return (
        f"<pre>{escape(side.text[:kept])}</pre>"
        f"<p class='cut'>truncated: {side.truncated_chars:,} more characters not shown</p>"
    )


def _live_totals(live: LiveTotals) -> str:
    similarity = "-" if live.mean_similarity is None else f"{live.mean_similarity:.3f}"
    rows = "".join(
        f"<tr><th>{name}</th><td>{side.answers}</td><td>{escape(side.latency_text)}</td>"
        f"<td>{escape(side.cost_text)}</td></tr>"
        for name, side in (("recorded", live.recorded), ("replayed", live.replayed))
    )
    return (
        f"<p>{live.compared} answer pair(s) compared, mean similarity {similarity}.</p>"
        "<table class='live-totals'><tr><th></th><th>answers</th><th>mean latency</th>"
        f"<th>estimated cost</th></tr>{rows}</table>"
    )


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _changes(changes: tuple[FieldChange, ...]) -> str:
    rows = "".join(
        f"<tr><td><code>{escape(c.path)}</code></td><td>{escape(c.change)}</td>"
        f"<td><code>{escape(_json(c.recorded))}</code></td>"
        f"<td><code>{escape(_json(c.replayed))}</code></td></tr>"
        for c in changes
    )
    head = "<tr><th>path</th><th>change</th><th>recorded</th><th>replayed</th></tr>"
    return f"<table>{head}{rows}</table>"


def _diff(text: str) -> str:
    out = []
    for line in text.splitlines():
        css = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else ""
        )
        out.append(f"<span class='{css}'>{escape(line)}</span>" if css else escape(line))
    return "\n".join(out)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
