"""Reports read from the log for reviewers: the export (JSONL, CSV) and the list of requests.

from audit.reports import EventFilter, export_events
summary = export_events(store, out, "jsonl", EventFilter(task="t"))  # out: a text file

Each name loads on first use (as the ``audit`` face does), so that importing one module of
this room does not import the others.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from audit.reports.export import EventFilter, ExportFormat, ExportSummary, export_events
    from audit.reports.requests import RequestSummary, list_requests

# Where each name that loads on first use lives.
_LAZY = {
    "EventFilter": "audit.reports.export",
    "ExportFormat": "audit.reports.export",
    "ExportSummary": "audit.reports.export",
    "export_events": "audit.reports.export",
    "RequestSummary": "audit.reports.requests",
    "list_requests": "audit.reports.requests",
}

__all__ = [
    "EventFilter",
    "ExportFormat",
    "ExportSummary",
    "RequestSummary",
    "export_events",
    "list_requests",
]


__getattr__ = _lazy_names(__name__, _LAZY)
