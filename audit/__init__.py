"""The audit store: an append-only, hash-chained event log on SQLite or PostgreSQL.

    from audit import AuditStore, EventDraft, EventKind
    with AuditStore.open("sqlite:///gateway-audit.db") as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1"))

``audit`` knows nothing of Claude, policies or the gateway; it imports nothing from them.
Its rooms, each importing only those listed before it:

- ``audit.store``: open a database, append events, read and find them (AuditStore), with
  the schema, the typed values, the chain's link hash, record signatures and migrations;
- ``audit.proofs``: the Merkle tree, signed checkpoints, receipts, witness cosignatures and
  RFC 3161 time-stamps;
- ``audit.verify``: the walk that checks a whole log (``verify_log(store)``) and the read
  path's check of one event;
- ``audit.sequenced``: log format 2's integrator, and its heads and receipts;
- ``audit.reports``: the export and the list of requests.

The public API is exactly ``__all__``. Beyond the errors, each name loads on first use (as
``gateway``'s own face does), so that importing one room (``audit.store.models``, say) does
not import all five: every CLI start pays only for what its command reads.
"""

import typing as _typing

from audit.errors import (
    AppendFailed,
    AuditStoreError,
    CheckpointError,
    ContentMismatch,
    DatabaseUnavailable,
    InvalidEvent,
    NotFound,
    SchemaMismatch,
)
from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from audit.reports.export import EventFilter, ExportSummary, export_events
    from audit.reports.requests import RequestSummary, list_requests
    from audit.store import AuditStore
    from audit.store.models import (
        Appended,
        Checkpoint,
        Defect,
        DefectKind,
        EventDraft,
        EventKind,
        StoredEvent,
        VerifyReport,
    )

# Where each name that loads on first use lives.
_LAZY = {
    "EventFilter": "audit.reports.export",
    "ExportSummary": "audit.reports.export",
    "export_events": "audit.reports.export",
    "RequestSummary": "audit.reports.requests",
    "list_requests": "audit.reports.requests",
    "AuditStore": "audit.store",
    "Appended": "audit.store.models",
    "Checkpoint": "audit.store.models",
    "Defect": "audit.store.models",
    "DefectKind": "audit.store.models",
    "EventDraft": "audit.store.models",
    "EventKind": "audit.store.models",
    "StoredEvent": "audit.store.models",
    "VerifyReport": "audit.store.models",
}

__all__ = [
    "AppendFailed",
    "Appended",
    "AuditStore",
    "AuditStoreError",
    "Checkpoint",
    "CheckpointError",
    "ContentMismatch",
    "DatabaseUnavailable",
    "Defect",
    "DefectKind",
    "EventDraft",
    "EventFilter",
    "EventKind",
    "ExportSummary",
    "InvalidEvent",
    "NotFound",
    "RequestSummary",
    "SchemaMismatch",
    "StoredEvent",
    "VerifyReport",
    "export_events",
    "list_requests",
]


__getattr__ = _lazy_names(__name__, _LAZY)
