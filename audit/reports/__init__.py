"""Reports read from the log for reviewers: the export (JSONL, CSV) and the list of requests.

from audit.reports import EventFilter, export_events
summary = export_events(store, out, "jsonl", EventFilter(task="t"))  # out: a text file
"""

from audit.reports.export import EventFilter, ExportFormat, ExportSummary, export_events
from audit.reports.requests import RequestSummary, list_requests

__all__ = [
    "EventFilter",
    "ExportFormat",
    "ExportSummary",
    "RequestSummary",
    "export_events",
    "list_requests",
]
