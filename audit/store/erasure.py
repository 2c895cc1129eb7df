"""Erasure in the store: a request's content rows removed under a recorded ERASURE event.

    data = erasure_data(request_id, digests, rule="retention", reason=..., actor=..., approver=...)
    appended = store.append(EventDraft(kind=EventKind.ERASURE, request_id=request_id, data=data))
    erase_content(store, [(appended.seq, digests)])  # erased_content rows in, payload rows out
    erasures_of(store, ["req_..."])                  # {request_id: its erasure event}

The event goes first and commits on its own (the chain lock); the rows go in a second
transaction, so a run killed between the two leaves an erasure event whose content is still
there, which the next run completes (:func:`erase_content` is idempotent) and verify reads as
intact. Content gone without an event is never the result. The database lets a payload row
go only while ``erased_content`` names its digest, and lets a digest into ``erased_content``
only when the event at its seq is an erasure event whose body names it (migration 0014).

What is erased is payloads, never events or policies: the chain, signatures, receipts and
checkpoints still verify, and the event says what went (digests), why, by whom, approved by
whom. Verify reads a missing payload named in ``erased_content`` as erased by policy when an
erasure event after the referencing event names it (audit.verify), else as tampering.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, bindparam, delete, select, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from audit.errors import AppendFailed
from audit.store._reads import stored_event
from audit.store._store import AuditStore
from audit.store.backend import Backend, db_reason
from audit.store.bounded import loads as bounded_loads
from audit.store.chain import EventRow, as_bytes
from audit.store.models import EventKind, StoredEvent
from audit.store.schema import ERASED_CONTENT, EVENTS, PAYLOADS

__all__ = [
    "ERASED_PREFIX",
    "RULES",
    "Reference",
    "erase_content",
    "erased_digests",
    "erased_mark",
    "erased_seq",
    "erasure_data",
    "erasures_of",
    "events_at",
    "present_payloads",
    "references",
]

# How the verify walk's content lookup marks a digest an erasure removed: "erased:<seq>".
ERASED_PREFIX = "erased:"
# The rules an erasure may be made under (the event's ``rule``).
RULES = ("retention", "subject_request", "other")
_CHUNK = 500


def erased_mark(seq: int) -> str:
    return f"{ERASED_PREFIX}{seq}"


def erased_seq(mark: str) -> int | None:
    """The erasure seq of an :func:`erased_mark`, None for anything else (a digest)."""
    if not mark.startswith(ERASED_PREFIX):
        return None
    try:
        return int(mark[len(ERASED_PREFIX) :])
    except ValueError:
        return None


def erasure_data(
    request_id: str,
    erased: Iterable[str],
    *,
    rule: str,
    reason: str,
    actor: str,
    approver: str | None,
    kept: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An ERASURE event's data: the digests it removes (``erased``), those of the request it
    keeps because another request still needs them (``kept``), the rule, reason, who ran it
    and who approved it."""
    if rule not in RULES:
        raise ValueError(f"erasure rule {rule!r} is not one of {', '.join(RULES)}")
    return {
        "erased_request": request_id,
        "erased": sorted(set(erased)),
        "kept": sorted(set(kept)),
        "rule": rule,
        "reason": reason,
        "actor": actor,
        "approver": approver,
        **(extra or {}),
    }


def erased_digests(event: StoredEvent) -> list[str]:
    """The digests an erasure event names as removed (empty for any other event)."""
    if event.kind is not EventKind.ERASURE:
        return []
    named = event.data.get("erased")
    return [d for d in named if isinstance(d, str)] if isinstance(named, list) else []


# Both backends take ON CONFLICT DO NOTHING (as audit.store._append's statements do), so no
# dialect's own insert construct: importing PostgreSQL's dialect for it cost every read of a
# SQLite log that loads this module (`gateway audit list`, bench/results/cli_start.md).
_INSERT_ERASED = text(
    f"INSERT INTO {ERASED_CONTENT.name} (digest, erasure_seq) VALUES (:digest, :erasure_seq) "
    "ON CONFLICT DO NOTHING"
)


def erase_content(store: AuditStore, erasures: Iterable[tuple[int, Iterable[str]]]) -> int:
    """Remove the payload rows each erasure event names, ``(erasure_seq, digests)``, in one
    transaction: their ``erased_content`` rows in, then the rows out. Idempotent (a second
    run inserts and deletes nothing); returns the payload rows deleted."""
    pairs = [(seq, d) for seq, digests in erasures for d in sorted(set(digests))]
    rows = [{"digest": d, "erasure_seq": seq} for seq, d in pairs]
    if not rows:
        return 0
    backend = store.backend
    deleted = 0
    try:
        with backend.writer.begin() as conn:
            if backend.dialect == "sqlite":
                # Deleted rows' bytes overwritten with zeros in the file, not left on free
                # pages for whoever copies the file next (docs/security.md).
                conn.exec_driver_sql("PRAGMA secure_delete = ON")
            for start in range(0, len(rows), _CHUNK):
                chunk = rows[start : start + _CHUNK]
                # executemany of one statement: compiled once, not per chunk of VALUES.
                conn.execute(_INSERT_ERASED, chunk)
                named = {d for _, d in pairs[start : start + _CHUNK]}
                gone = delete(PAYLOADS).where(PAYLOADS.c.digest.in_(named))
                deleted += conn.execute(gone).rowcount or 0
    except SQLAlchemyError as exc:
        seqs = sorted({seq for seq, _ in pairs})
        raise AppendFailed(
            f"the content named by erasure event(s) seq {seqs[0]}..{seqs[-1]} could not be "
            f"removed ({db_reason(exc)}). Nothing was removed.",
            hint="Only the eraser role may remove content (gateway db grant ROLE --eraser); "
            "run the erasure again: it completes what was begun.",
        ) from exc
    if deleted and backend.dialect == "sqlite":
        _checkpoint_wal(backend)
    return deleted


def _checkpoint_wal(backend: Backend) -> None:
    """Copy the WAL into the file and empty it, so the erased pages' earlier versions do not
    linger in ``-wal`` (best effort: a reader holding an old snapshot keeps them until the
    next checkpoint; SQLite retries at its own)."""
    with backend.writer.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def present_payloads(store: AuditStore, digests: Iterable[str]) -> set[str]:
    """Which of ``digests`` still have a payload row (without reading their bytes)."""
    wanted = sorted(set(digests))
    found: set[str] = set()
    with store.backend.reader.connect() as conn:
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            found.update(
                conn.execute(
                    select(PAYLOADS.c.digest).where(PAYLOADS.c.digest.in_(chunk))
                ).scalars()
            )
    return found


class Reference(NamedTuple):
    """What an erasure's planning needs of one event, read without the rest of it."""

    seq: int
    request_id: str
    kind: str
    recorded_at: datetime
    task: str | None
    caller: str | None
    policy_fingerprint: str | None
    payloads: tuple[str, ...]  # the digests it names
    erased: tuple[str, ...]  # an erasure event's ``erased`` list (empty for other kinds)
    subject: str | None = None  # a REQUEST's ``data["subject"]`` (a keyed digest), if any
    # A REPLAY's (or a replay's ATTEMPT_FAILED's) ``data["original_request_id"]``: the
    # request whose content its payloads copy (a live replay re-sends the recorded prompt),
    # erased with it.
    original: str | None = None
    subject_key: str | None = None  # the id of the key it is keyed under (``subject_key``)


_REPLAY = EventKind.REPLAY.value
# Events of a live replay run that may hold the replayed request's content: the REPLAY events
# (the prompt re-sent, the answer) and its failed attempts (an upstream's words may quote it).
_COPIES = (_REPLAY, EventKind.ATTEMPT_FAILED.value)


def references(store: AuditStore, page: int = 2000) -> Iterator[Reference]:
    """Every event's references, in seq order, a keyset page at a time (flat memory). A
    body that cannot be read names nothing (verify names the defect)."""
    columns = (
        EVENTS.c.seq,
        EVENTS.c.request_id,
        EVENTS.c.kind,
        EVENTS.c.recorded_at,
        EVENTS.c.task,
        EVENTS.c.caller,
        EVENTS.c.policy_fingerprint,
        EVENTS.c.body,
    )
    last = 0
    while True:
        with store.backend.reader.connect() as conn:
            rows = conn.execute(
                select(*columns).where(EVENTS.c.seq > last).order_by(EVENTS.c.seq).limit(page)
            ).all()
        for seq, request_id, kind, at, task, caller, fingerprint, body in rows:
            try:
                parsed = bounded_loads(as_bytes(body))
                named = parsed.get("payloads") or {}
                data = parsed.get("data") or {}
                digests = tuple(v for v in named.values() if isinstance(v, str))
                listed = data.get("erased") if kind == EventKind.ERASURE.value else None
                erased = (
                    tuple(d for d in listed if isinstance(d, str))
                    if isinstance(listed, list)
                    else ()
                )
                tag, tag_key = (
                    (data.get("subject"), data.get("subject_key"))
                    if kind == EventKind.REQUEST.value
                    else (None, None)
                )
                subject = tag if isinstance(tag, str) else None
                subject_key = tag_key if isinstance(tag_key, str) else None
                copied = data.get("original_request_id") if kind in _COPIES else None
                original = copied if isinstance(copied, str) else None
            except (ValueError, AttributeError):
                digests, erased, subject, original, subject_key = (), (), None, None, None
            yield Reference(
                seq,
                request_id,
                kind,
                at,
                task,
                caller,
                fingerprint,
                digests,
                erased,
                subject,
                original,
                subject_key,
            )
        if len(rows) < page:
            return
        last = rows[-1][0]


def events_at(conn: Connection, seqs: Iterable[int]) -> dict[int, StoredEvent]:
    """The events at ``seqs`` (those that exist), read on ``conn``."""
    result = conn.execute(select(EVENTS).where(EVENTS.c.seq.in_(list(seqs))))
    return {row.seq: stored_event(row) for row in EventRow.from_result(result)}


# Built once: the replay cache asks it before every memo hit, and a statement object built per
# call cost more than the indexed lookup itself (the IN list's coercion, SQLAlchemy's cache key).
_FIRST_ERASURE = (
    select(EVENTS.c.seq)
    .where(EVENTS.c.request_id == bindparam("request_id"), EVENTS.c.kind == EventKind.ERASURE.value)
    .order_by(EVENTS.c.seq)
    .limit(1)
)


# The same lookup as the driver's own SQL, for the drivers whose parameter style is known: the
# replay cache asks it before every memo hit, and SQLAlchemy's connection, transaction and
# statement machinery around a 10 us indexed lookup cost 50 us more. One statement outside any
# transaction reads the latest committed state, as the SQLAlchemy path's own transaction does.
_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
_FIRST_ERASURE_SQL = (
    f"SELECT seq FROM {EVENTS.name} WHERE request_id = {{0}} AND kind = {{0}} ORDER BY seq LIMIT 1"
)


def erasure_of(store: AuditStore, request_id: str) -> StoredEvent | None:
    """The first erasure event of ``request_id``, or None (one indexed lookup of its seq; the
    event is read only when there is one). Not authenticated here, as :func:`erasures_of`."""
    reader = store.backend.reader
    mark = _MARKS.get(str(reader.dialect.paramstyle)) if EVENTS.schema is None else None
    if mark is not None:
        seq = _first_erasure_seq(reader, _FIRST_ERASURE_SQL.format(mark), request_id)
        if seq is None:
            return None
        with reader.connect() as conn:
            return events_at(conn, [seq]).get(seq)
    with reader.connect() as conn:
        found = conn.execute(_FIRST_ERASURE, {"request_id": request_id}).scalar()
        if found is None:
            return None
        return events_at(conn, [found]).get(found)


def _first_erasure_seq(reader: Engine, sql: str, request_id: str) -> int | None:
    raw = reader.raw_connection()  # from the reader's pool; rolled back on its return
    try:
        cursor = raw.cursor()
        try:
            cursor.execute(sql, (request_id, EventKind.ERASURE.value))
            row = cursor.fetchone()
        finally:
            cursor.close()
    except reader.dialect.loaded_dbapi.Error as exc:
        # As SQLAlchemy's own path does: a lost connection (a restarted server) is dropped
        # from the pool, not handed to the next memo hit to fail again.
        lost = reader.dialect.is_disconnect(exc, raw.dbapi_connection, None)
        if lost:
            raw.invalidate(exc)
        raise DBAPIError.instance(
            sql,
            (request_id,),
            exc,
            reader.dialect.loaded_dbapi.Error,
            connection_invalidated=lost,
        ) from exc
    finally:
        raw.close()
    return None if row is None else int(row[0])


def erasures_of(store: AuditStore, request_ids: Iterable[str]) -> dict[str, StoredEvent]:
    """The first erasure event of each of ``request_ids`` that has one (by the request_id
    index). Not authenticated here: a reader that acts on one checks it first."""
    ids = sorted(set(request_ids))
    found: dict[str, StoredEvent] = {}
    with store.backend.reader.connect() as conn:
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            result = conn.execute(
                select(EVENTS)
                .where(EVENTS.c.request_id.in_(chunk), EVENTS.c.kind == EventKind.ERASURE.value)
                .order_by(EVENTS.c.seq)
            )
            for row in EventRow.from_result(result):
                event = stored_event(row)
                found.setdefault(event.request_id, event)
    return found
