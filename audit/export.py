"""JSONL and CSV export of the audit log, recorded as an EXPORT event first.

    with open("audit.jsonl", "w") as out:
        summary = export_events(store, out, "jsonl", EventFilter(task="compliance_review"))

Each exported event carries its body exactly as hashed (as UTF-8 text) with ``prev_hash`` and
``hash``, so a recipient can recompute the chain without the database. The export covers the
events before its own EXPORT event: the record of the read is the last thing in the log that
the read could not include.
"""

from __future__ import annotations

import csv
import json
import uuid
from datetime import datetime
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict

from audit.chain import format_time
from audit.models import EventDraft, EventKind, StoredEvent
from audit.store import AuditStore

ExportFormat = Literal["jsonl", "csv"]
COLUMNS = (
    "seq",
    "event_id",
    "request_id",
    "kind",
    "recorded_at",
    "task",
    "caller",
    "policy_fingerprint",
    "request_hash",
    "prev_hash",
    "hash",
    "body",
)


class EventFilter(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str | None = None
    caller: str | None = None
    kind: EventKind | None = None
    since: datetime | None = None
    until: datetime | None = None


class ExportSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    events: int
    bytes: int
    export_seq: int  # the EXPORT event that records this read


def export_record(event: StoredEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "event_id": event.event_id,
        "request_id": event.request_id,
        "kind": event.kind.value,
        "recorded_at": format_time(event.recorded_at),
        "task": event.task,
        "caller": event.caller,
        "policy_fingerprint": event.policy_fingerprint,
        "request_hash": event.request_hash,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
        "body": event.body.decode("utf-8"),
    }


def export_events(
    store: AuditStore,
    out: TextIO,
    fmt: ExportFormat,
    filters: EventFilter | None = None,
    *,
    reviewer: str | None = None,
) -> ExportSummary:
    filters = filters or EventFilter()
    recorded = store.append(
        EventDraft(
            kind=EventKind.EXPORT,
            request_id=f"export-{uuid.uuid4().hex}",
            caller=reviewer,
            data={"format": fmt, "filters": filters.model_dump(mode="json", exclude_none=True)},
        )
    )
    writer = csv.DictWriter(out, fieldnames=COLUMNS) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    count = size = 0
    for event in store.iter_events(**filters.model_dump(), before_seq=recorded.seq):
        record = export_record(event)
        if writer is not None:
            writer.writerow(record)
        else:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
        size += len(event.body)
    return ExportSummary(events=count, bytes=size, export_seq=recorded.seq)
