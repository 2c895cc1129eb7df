"""The store's reads, as rows: the filters a read takes, and a row read back as an event.

where = filters_of(task, caller, kind, since, until, before_seq)
event = stored_event(row)           # a damaged body reads as data {UNREADABLE: why}
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import ColumnElement

from audit.store.bounded import loads as bounded_loads
from audit.store.chain import EventRow
from audit.store.models import EventKind, StoredEvent
from audit.store.schema import EVENTS

READ_PAGE = 1000  # rows of the other reads (list, export, a request's events)
# The one data key of an event read back from a body that cannot be parsed (damaged, or
# nested deeper than a reader accepts): its value says why.
UNREADABLE = "_unreadable"


class EventKey(NamedTuple):
    """An event's place, request and policy, read from its columns alone."""

    seq: int
    request_id: str
    policy_fingerprint: str | None


def filters_of(
    task: str | None,
    caller: str | None,
    kind: EventKind | str | None,
    since: datetime | None,
    until: datetime | None,
    before_seq: int | None,
    exclude_caller: str | None = None,
) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if task is not None:
        where.append(EVENTS.c.task == task)
    if caller is not None:
        where.append(EVENTS.c.caller == caller)
    if kind is not None:
        where.append(EVENTS.c.kind == EventKind(kind).value)
    if since is not None:
        where.append(EVENTS.c.recorded_at >= since)
    if until is not None:
        where.append(EVENTS.c.recorded_at < until)
    if before_seq is not None:
        where.append(EVENTS.c.seq < before_seq)
    if exclude_caller is not None:  # NULL is another caller: plain != would drop those rows
        where.append(EVENTS.c.caller.is_distinct_from(exclude_caller))
    return where


def stored_event(row: EventRow) -> StoredEvent:
    try:
        parsed = bounded_loads(row.body)  # depth and size bounded: a stored body is untrusted
        data = parsed.get("data") or {}
        payloads = parsed.get("payloads") or {}
        if not isinstance(data, dict) or not isinstance(payloads, dict):
            raise ValueError("its data or payloads are not JSON objects")
        if not all(isinstance(v, str) for v in payloads.values()):
            raise ValueError("its payload digests are not strings")
    except (ValueError, AttributeError) as exc:
        # A damaged body still reads, its data marked unreadable; verify names the defect.
        data, payloads = {UNREADABLE: f"the event body cannot be read: {exc}"}, {}
    return StoredEvent(**row._asdict(), data=data, payload_digests=payloads)
