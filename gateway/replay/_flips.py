"""A migration report's flip matrix: per task with a verdict, how many answer pairs went from
each recorded verdict to each replayed one, the flips first and each flipped pair named.

    lines = flip_lines(report.by_task())        # the text report's top
    html = flips_html(report.by_task())         # the HTML report's top, linking each pair

A verdict is the categorical part of an answer (gateway.replay._verdicts). A flip (the
verdict changed) is what a go/no-go decision turns on, so it is shown before any row.
"""

from __future__ import annotations

from html import escape

from gateway.replay._model import TaskSummary, VerdictCell

__all__ = ["flip_lines", "flips_html"]

CORNER = "recorded \\ replayed"  # the matrix's corner: rows recorded, columns replayed


def _labels(cells: tuple[VerdictCell, ...]) -> tuple[list[str], list[str]]:
    return sorted({c.recorded for c in cells}), sorted({c.replayed for c in cells})


def _headline(t: TaskSummary) -> str:
    pairs = sum(c.count for c in t.verdicts)
    return f"task {t.task}: {t.flips} of {pairs} answer pair(s) flipped their verdict"


def flip_lines(tasks: tuple[TaskSummary, ...]) -> list[str]:
    """The flip matrices as text: rows recorded, columns replayed, then each flipped pair."""
    lines: list[str] = []
    for t in (t for t in tasks if t.verdicts):
        rows, cols = _labels(t.verdicts)
        count = {(c.recorded, c.replayed): c.count for c in t.verdicts}
        width = max(len(CORNER), *(len(r) for r in rows))
        widths = [max(len(c), 5) for c in cols]
        lines.append(_headline(t) + ":")
        head = "  ".join(f"{c:>{w}}" for c, w in zip(cols, widths, strict=True))
        lines.append(f"  {CORNER:{width}}  {head}")
        for r in rows:
            cells = "  ".join(
                f"{count.get((r, c), 0):>{w}}" for c, w in zip(cols, widths, strict=True)
            )
            lines.append(f"  {r:{width}}  {cells}")
        for c in t.verdicts:
            if c.flipped:
                lines.append(f"  flipped {c.recorded} -> {c.replayed}: {', '.join(c.request_ids)}")
    return lines


def flips_html(tasks: tuple[TaskSummary, ...]) -> str:
    """The flip matrices as HTML, each flipped count linking to its pairs' sections."""
    parts: list[str] = []
    for t in (t for t in tasks if t.verdicts):
        rows, cols = _labels(t.verdicts)
        cells = {(c.recorded, c.replayed): c for c in t.verdicts}
        head = "".join(f"<th>{escape(c)}</th>" for c in cols)
        body = ""
        for r in rows:
            tds = ""
            for c in cols:
                cell = cells.get((r, c))
                n = cell.count if cell is not None else 0
                mark = " class='failed'" if cell is not None and cell.flipped else ""
                tds += f"<td{mark}>{n}</td>"
            body += f"<tr><th>{escape(r)}</th>{tds}</tr>"
        links = "".join(
            f"<li>{escape(c.recorded)} &rarr; {escape(c.replayed)}: "
            + ", ".join(f"<a href='#{escape(i)}'>{escape(i)}</a>" for i in c.request_ids)
            + "</li>"
            for c in t.verdicts
            if c.flipped
        )
        parts.append(
            f"<h3>{escape(_headline(t))}</h3>"
            f"<table class='flips'><tr><th>{escape(CORNER)}</th>"
            f"{head}</tr>{body}</table>" + (f"<ul>{links}</ul>" if links else "")
        )
    if not parts:
        return ""
    return "<section id='flips'><h2>Verdict flips</h2>" + "".join(parts) + "</section>"
