"""A self-contained HTML report of a replay run: the summary, then each request with its diff.

    Path("replay.html").write_text(render_html(report), encoding="utf-8")

No scripts, no external resources; every value is escaped, because response text is
untrusted (a model can be made to write ``<script>``).
"""

from __future__ import annotations

import json
from html import escape

from gateway.replay._model import FieldChange, ReplayReport, RequestReplay

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em; color: #1b1b1b; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; white-space: pre-wrap; }
.passed, .identical { color: #1a7f37; } .failed, .refused { color: #b42318; }
.differing { color: #9a6700; } .skipped { color: #57606a; }
.add { color: #1a7f37; } .del { color: #b42318; } .hunk { color: #0550ae; }
section { border-top: 1px solid #ddd; margin-top: 1.5em; }
"""


def render_html(report: ReplayReport) -> str:
    s = report.summary
    counts = "".join(
        f"<tr><th class='{escape(k)}'>{escape(k)}</th><td>{v}</td></tr>"
        for k, v in s.counts.items()
    )
    overview = "".join(_overview_row(r) for r in report.requests)
    sections = "".join(_section(r) for r in report.requests)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">"
        f"<title>gateway replay ({escape(s.mode.value)})</title><style>{_CSS}</style></head>"
        f"<body><h1>Replay report: {escape(s.mode.value)}</h1>"
        f"<p>Run <code>{escape(s.run_id)}</code>, {s.total} request(s).</p>"
        f"<table id='summary'>{counts}</table>"
        "<table id='requests'><tr><th>seq</th><th>request</th><th>task</th><th>model</th>"
        f"<th>outcome</th><th>similarity</th><th>reason</th></tr>{overview}</table>"
        f"{sections}</body></html>\n"
    )


def _overview_row(r: RequestReplay) -> str:
    similarity = "" if r.similarity is None else f"{r.similarity:.3f}"
    model = r.target_model or r.model_id or ""
    return (
        f"<tr><td>{r.seq}</td><td><a href='#{escape(r.request_id)}'>{escape(r.request_id)}</a>"
        f"</td><td>{escape(r.task or '')}</td><td>{escape(model)}</td>"
        f"<td class='{escape(r.outcome.value)}'>{escape(r.outcome.value)}</td>"
        f"<td>{similarity}</td><td>{escape(r.reason or '')}</td></tr>"
    )


def _section(r: RequestReplay) -> str:
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
    if r.findings:
        items = "".join(f"<li>{escape(f)}</li>" for f in r.findings)
        parts.append(f"<h3>Review findings on the new model</h3><ul>{items}</ul>")
    if r.request_changes:
        parts.append("<h3>Request changes</h3>" + _changes(r.request_changes))
    if r.json_changes:
        parts.append("<h3>Answer field changes</h3>" + _changes(r.json_changes))
    if r.text_diff:
        parts.append("<h3>Answer text diff</h3><pre>" + _diff(r.text_diff) + "</pre>")
    parts.append("</section>")
    return "".join(parts)


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
