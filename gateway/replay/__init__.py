"""Replay recorded requests: verify them, re-send them, or plan them on another model.

    from gateway.replay import ReplaySession, Selection
    with ReplaySession.open(settings) as session:
        report = session.run(session.prepare(Selection(task="compliance_review")))
    report.summary.line()     # "verify: 3 request(s): 0 identical, ..., 3 passed"

See docs/replay.md for the modes and what each records.
"""

from gateway.replay._answers import AnswerSide, LiveTotals
from gateway.replay._diff import TextComparison, compare_text, json_changes
from gateway.replay._flips import flip_lines
from gateway.replay._html import render_html, write_html
from gateway.replay._model import (
    SIMILARITY_MEANS,
    Check,
    FieldChange,
    Mode,
    Outcome,
    ReplayReport,
    ReportContext,
    RequestReplay,
    Summary,
    TaskSummary,
    VerdictCell,
    identical_means,
    versions_line,
)
from gateway.replay._recorded import Selection, selection_text
from gateway.replay._runner import PreparedRun, Replayer
from gateway.replay._session import ReplaySession
from gateway.replay._spool import RowSpool

__all__ = [
    "SIMILARITY_MEANS",
    "AnswerSide",
    "Check",
    "FieldChange",
    "LiveTotals",
    "Mode",
    "Outcome",
    "PreparedRun",
    "ReplayReport",
    "ReplaySession",
    "Replayer",
    "ReportContext",
    "RequestReplay",
    "RowSpool",
    "Selection",
    "Summary",
    "TaskSummary",
    "TextComparison",
    "VerdictCell",
    "compare_text",
    "flip_lines",
    "identical_means",
    "json_changes",
    "render_html",
    "selection_text",
    "versions_line",
    "write_html",
]
