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
from typing import Literal, TextIO

from pydantic import BaseModel, ConfigDict

from audit.models import EXPORT_COLUMNS, EventDraft, EventKind
from audit.store import AuditStore

ExportFormat = Literal["jsonl", "csv"]
COLUMNS = EXPORT_COLUMNS  # the record's keys, in order: a documented format


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
        record = event.export_row()
        if writer is not None:
            writer.writerow(record)
        else:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
        size += len(event.body)
    return ExportSummary(events=count, bytes=size, export_seq=recorded.seq)
