"""JSONL and CSV export of the audit log, recorded as an EXPORT event first.

    with open("audit.jsonl", "w") as out:
        summary = export_events(store, out, "jsonl", EventFilter(task="compliance_review"))

Each exported event carries its body exactly as hashed (as UTF-8 text) with ``prev_hash``,
``hash`` and the record ``signature`` and ``key_id``, so a recipient can recompute the chain
and check who wrote each event without the database. The export covers the events up to the
head it found (``upto_seq``) and its own EXPORT event records that head, how many events
match and a digest of their hashes (``rows_digest``) before anything is written. In JSONL the
last record carries that EXPORT event, signed, under ``export_head``: a slice that lost or
gained a record, or lost its end, no longer matches it (``gateway audit verify --export``).

A format-2 log (audit.store.sequenced): the EXPORT event also records the log's ``store_id``
(which a format-2 signature names), ``sequenced_from`` (its first format-2 seq) and
``linked_seq`` (the integrator's head then), the export covers the settled head, and each
JSONL record of a format-2 seq carries its link and, at an integrator checkpoint's size,
that checkpoint (audit.sequenced.export_chain).
"""

from __future__ import annotations

import csv
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict

from audit.sequenced.export_chain import settled_head, with_links
from audit.store import AuditStore
from audit.store.models import (
    EXPORT_COLUMNS,
    SIGNED_EXPORT_COLUMNS,
    EventDraft,
    EventKind,
    StoredEvent,
)

ExportFormat = Literal["jsonl", "csv"]
COLUMNS = EXPORT_COLUMNS  # an event's record keys, in order: a documented format
EXPORTED_COLUMNS = SIGNED_EXPORT_COLUMNS  # an exported record's keys, in order
HEAD_KEY = "export_head"  # the last JSONL record's key for the signed EXPORT event
# Extra keys for an event's record (say, a request's content), or None for none.
Annotate = Callable[[StoredEvent], dict[str, Any] | None]


class EventFilter(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str | None = None
    caller: str | None = None
    kind: EventKind | None = None
    since: datetime | None = None
    until: datetime | None = None
    # Leave out the events of this caller (the gateway's experiment runner, say): filtered by
    # the database, like the others.
    exclude_caller: str | None = None


class ExportSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    events: int
    bytes: int
    export_seq: int  # the EXPORT event that records this read
    upto_seq: int = 0  # the head the export covers (events after it are left out)
    rows_digest: str = ""  # what the EXPORT event recorded of the exported hashes


def rows_digest(hashes: Iterable[str]) -> str:
    """The digest an EXPORT event records of its slice: sha256 over each hash and a newline."""
    digest = hashlib.sha256()
    for value in hashes:
        digest.update(value.encode("ascii") + b"\n")
    return "sha256:" + digest.hexdigest()


def export_events(
    store: AuditStore,
    out: TextIO,
    fmt: ExportFormat,
    filters: EventFilter | None = None,
    *,
    reviewer: str | None = None,
    annotate: Annotate | None = None,
    with_content: bool = False,
) -> ExportSummary:
    """Write the matching events up to the current head; recorded first as an EXPORT event.

    The slice is read twice, streamed both times: once to count and digest it for the
    EXPORT event, then to write it (events at or below the head never change, so both reads
    see the same events). ``annotate`` adds keys to an event's record (never to its body);
    ``with_content`` records in the EXPORT event that it adds each REQUEST's content, so an
    offline verify knows which records must carry it.
    """
    filters = filters or EventFilter()
    where = filters.model_dump()
    era = store.sequenced_from
    reader = store.backend.reader
    sequenced: dict[str, Any] = {}
    if era is None:
        upto, _ = store.head()
    else:  # format 2: up to the settled head, which the second read sees unchanged
        upto, linked = settled_head(reader, era)
        sequenced = {"store_id": store.store_id, "sequenced_from": era, "linked_seq": linked}
    count = 0

    def counted(events: Iterable[StoredEvent]) -> Iterable[str]:
        nonlocal count
        for event in events:
            count += 1
            yield event.hash

    digest = rows_digest(counted(store.iter_events(**where, before_seq=upto + 1)))
    recorded = store.append(
        EventDraft(
            kind=EventKind.EXPORT,
            request_id=f"export-{uuid.uuid4().hex}",
            caller=reviewer,
            data={
                "format": fmt,
                "filters": filters.model_dump(mode="json", exclude_none=True),
                "upto_seq": upto,
                "events": count,
                "rows_digest": digest,
                **sequenced,
                **({"with_content": True} if with_content else {}),
            },
        )
    )
    writer = csv.DictWriter(out, fieldnames=EXPORTED_COLUMNS) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    written = size = 0
    held: dict[str, Any] | None = None  # JSONL: the last record waits for the head
    events = store.iter_events(**where, before_seq=upto + 1)
    # Format 2, JSONL: each record with its link (and checkpoint); CSV keeps its columns.
    linked_events = (
        with_links(reader, era, events)
        if era is not None and writer is None
        else ((event, {}) for event in events)
    )
    for event, chained in linked_events:
        record = event.export_row(signed=True)
        if writer is not None:
            writer.writerow(record)
        else:
            if held is not None:
                out.write(json.dumps(held, ensure_ascii=False) + "\n")
            extra = annotate(event) if annotate is not None else None
            record = {**record, **chained} if chained else record
            held = {**record, **extra} if extra else record
        written += 1
        size += len(event.body)
    if writer is None:
        appended = store.event(recorded.seq)
        head = appended.export_row(signed=True)
        if era is not None:  # its link, if the integrator has made it already
            head = {**head, **next(with_links(reader, era, [appended]))[1]}
        held = {**held, HEAD_KEY: head} if held is not None else {HEAD_KEY: head}
        out.write(json.dumps(held, ensure_ascii=False) + "\n")
    return ExportSummary(
        events=written,
        bytes=size,
        export_seq=recorded.seq,
        upto_seq=upto,
        rows_digest=digest,
    )
