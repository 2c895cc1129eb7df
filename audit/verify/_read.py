"""Verify's reads: the events as stored, in large pages, and the content they reference.

    reader = ChainReader(backend, upto=census.highest)
    for page in reader.pages():                     # lists of EventRow, seq order, 1..upto
        contents = reader.content_digests(refs)     # digest -> what its bytes hash to
    Verifier(..., same_time=reader.same_time)

Verify reads every row once, so this path skips what the typed reads pay per value: rows come
straight from the driver's cursor (no SQLAlchemy result processing), on PostgreSQL one page
of :data:`PAGE_ROWS` ahead is read by a thread while the last one is checked, and:

- SQLite's ``recorded_at`` stays the text it was stored as. A row whose text is the spelling
  the store writes for its body's instant needs no parse; any other spelling is read again
  through the column's type (what every other read does) and compared as an instant, so a
  hand-edited spelling of the same instant is still accepted and another instant refused.
- PostgreSQL hashes referenced content in the server (``sha256(content)``): the bytes need
  not cross the connection. SQLite's are hashed here, read as :func:`audit.store.chain.as_bytes`
  reads a hand-edited value.

A value whose type a hand-edit changed (a TEXT body, an INTEGER hash) is put back the way
:meth:`audit.store.chain.EventRow.from_result` does, so such a row is named, not crashed on.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from hashlib import sha256
from typing import Any

from sqlalchemy import select

from audit.canonical import DIGEST_PREFIX, digest
from audit.store.backend import Backend
from audit.store.chain import EventRow, as_bytes
from audit.store.erasure import erased_mark
from audit.store.schema import EVENT_COLUMNS, EVENTS

PAGE_ROWS = 2000  # the default; verify passes audit.verify._walk.PAGE
_CHUNK = 900  # values in one IN list (SQLite's default limit on variables is far above)
_SCAN_FROM = 64  # referenced payloads in a page from which a scan beats lookups
_SCAN_SLACK = 64  # rows scanned beyond one per referenced payload (others' payloads)
_BODY, _PREV, _HASH = (EVENT_COLUMNS.index(c) for c in ("body", "prev_hash", "hash"))
_make = EventRow._make
_SIGNATURE_COLUMNS = ("signature", "key_id")


class ChainReader:
    def __init__(
        self, backend: Backend, *, upto: int, page: int = PAGE_ROWS, signatures: bool = True
    ) -> None:
        """``signatures``: False when the walk reads neither the ``signature`` nor the
        ``key_id`` column (links only: no signature checked, none folded), which then read
        as NULL; a sixth of a row's bytes not decoded."""
        self._backend = backend
        self._upto = upto
        self._page = page
        self._sqlite = backend.dialect == "sqlite"
        self._few_policies = True  # the policy keys are read whole (_policies_among)
        mark = "?" if self._sqlite else "%s"
        # The columns in the table's order, by their names: the one source of a row's shape.
        columns = [
            c if signatures or c not in _SIGNATURE_COLUMNS else f"NULL AS {c}"
            for c in EVENT_COLUMNS
        ]
        self._page_sql = (
            f"SELECT {', '.join(columns)} FROM events "
            f"WHERE seq > {mark} AND seq >= 1 AND seq <= {mark} ORDER BY seq LIMIT {mark}"
        )

    # -- event rows ---------------------------------------------------------------------------

    def pages(self) -> Iterator[list[EventRow]]:
        """Every row at seq 1..upto in seq order, a page at a time (at most two held).

        On PostgreSQL the next page is read by a thread while the caller checks this one: the
        read waits on the server. SQLite's read is this process's own work, and ``sqlite3``
        gives up the GIL at every row it steps: a reading thread beside a busy one traded the
        GIL with it row by row, a tenth of the walk's CPU (bench/results/verify_speed.md), so
        there the caller reads each page itself."""
        if self._sqlite:
            yield from self._pages_here()
            return
        ready: queue.Queue[list[EventRow] | BaseException | None] = queue.Queue(maxsize=1)
        stop = threading.Event()

        def read() -> None:
            try:
                for rows in self._pages_here():
                    ready.put(rows)
                    if stop.is_set():
                        break
                ready.put(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread
                ready.put(exc)

        reader = threading.Thread(target=read, name="audit-verify-reader", daemon=True)
        reader.start()
        try:
            while True:
                item = ready.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while reader.is_alive():  # unblock a put() waiting on a page nobody will take
                with contextlib.suppress(queue.Empty):
                    ready.get(timeout=0.05)
            reader.join()

    def _pages_here(self) -> Iterator[list[EventRow]]:
        """The non-empty pages, read in the calling thread (the reader thread's loop too)."""
        last = 0
        while True:
            rows = self._read_page(last)
            if rows:
                yield rows
            if len(rows) < self._page:
                return
            last = rows[-1].seq

    def _read_page(self, after: int) -> list[EventRow]:
        return self.read_rows(after, self._upto)

    def read_rows(self, after: int, upto: int) -> list[EventRow]:
        """The rows at seq after+1..``upto`` (at most a page of them), in seq order: one page
        of :meth:`pages`, or a range walk's worker's range (audit.verify._range)."""
        with self._backend.reader.connect() as conn:
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                if self._sqlite:
                    cursor.execute(self._page_sql, (after, upto, self._page))
                else:
                    # Binary results: a body crosses as its bytes, not as hex text that the
                    # server encodes and the driver decodes (a third of the read's CPU here).
                    cursor.execute(self._page_sql, (after, upto, self._page), binary=True)  # type: ignore[call-arg]  # psycopg's cursor
                raw = cursor.fetchall()
            finally:
                cursor.close()
        rows = []
        for values in raw:
            if (
                type(values[_BODY]) is not bytes
                or type(values[_PREV]) is not str
                or type(values[_HASH]) is not str
            ):
                values = _retyped(values)
            rows.append(_make(values))
        return rows

    # -- referenced content -------------------------------------------------------------------

    def content_digests(
        self, refs: Iterable[str], newest: Sequence[str] = ()
    ) -> Mapping[str, str | None]:
        """For each referenced digest that a payload or policy row is stored under, the digest
        its bytes hash to (a policy row wins over a payload row of the same digest).

        ``newest``: a few of the digests the page's last events reference. On SQLite the
        payloads a page references were mostly inserted together, as its events were: those
        are read in one scan of their rowid range, the rest looked up by digest."""
        wanted = set(refs)
        found: dict[str, str | None] = {}
        if not wanted:
            return found
        with self._backend.reader.connect() as conn:
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                look_up: Iterable[str] = wanted
                if self._sqlite and newest and len(wanted) >= _SCAN_FROM:
                    found.update(self._scanned(cursor, wanted, newest))
                    look_up = wanted.difference(found)
                for table, key, digests in (
                    ("payloads", "digest", sorted(look_up)),
                    ("policies", "fingerprint", self._policies_among(cursor, wanted)),
                ):
                    for start in range(0, len(digests), _CHUNK):
                        chunk = digests[start : start + _CHUNK]
                        found.update(self._digests(cursor, table, key, chunk))
                gone = sorted(wanted.difference(found))
                for start in range(0, len(gone), _CHUNK):
                    found.update(self._erased(cursor, gone[start : start + _CHUNK]))
            finally:
                cursor.close()
        return found

    def _policies_among(self, cursor: Any, wanted: set[str]) -> list[str]:
        """The wanted digests that a policy row may be stored under: those the table's keys
        hold, read whole while it has no more rows than are wanted (a log keeps a policy per
        reviewed version: a handful), else all of them. The same rows are looked up either
        way; each of a page's payload digests was a lookup of its own (0.45 µs of CPU per
        event here, against 0.002 for reading the keys of a table with none)."""
        if self._few_policies:
            mark = "?" if self._sqlite else "%s"
            try:
                cursor.execute(f"SELECT fingerprint FROM policies LIMIT {mark}", (len(wanted) + 1,))
                keys = cursor.fetchall()
            except sqlite3.Error:  # a hand-edited key SQLite cannot read as text: looked up
                keys = None
            if keys is not None and len(keys) <= len(wanted):
                return sorted(wanted.intersection(key for (key,) in keys))
            self._few_policies = False  # as many as a page wants: lookups from now on
        return sorted(wanted)

    def _scanned(self, cursor: Any, wanted: set[str], newest: Sequence[str]) -> Iterator[Any]:
        """The wanted payloads among the rows inserted just before the ``newest`` ones: one
        sequential read of the table instead of a random index lookup each (the same rows:
        a digest is the table's key, however it is found)."""
        marks = ", ".join("?" * len(newest))
        try:
            cursor.execute(f"SELECT rowid FROM payloads WHERE digest IN ({marks})", list(newest))
            rowids = [r for (r,) in cursor.fetchall() if type(r) is int]
            if not rowids:
                return
            high = max(rowids)
            cursor.execute(
                "SELECT digest, content FROM payloads WHERE rowid BETWEEN ? AND ?",
                (high - len(wanted) - _SCAN_SLACK, high),
            )
            rows = cursor.fetchall()
        except sqlite3.OperationalError:  # a table rebuilt without rowids: looked up instead
            return
        for name, blob in rows:
            if name in wanted:
                if type(blob) is not bytes:
                    blob = as_bytes(blob)
                yield name, DIGEST_PREFIX + sha256(blob).hexdigest()  # digest(blob), inlined

    def _digests(self, cursor: Any, table: str, key: str, chunk: list[str]) -> Iterator[Any]:
        if self._sqlite:
            marks = ", ".join("?" * len(chunk))
            cursor.execute(f"SELECT {key}, content FROM {table} WHERE {key} IN ({marks})", chunk)
            for name, blob in cursor.fetchall():
                yield name, digest(blob if type(blob) is bytes else as_bytes(blob))
        elif table == "payloads":
            # Through the function any role may call (migration 0015): a reviewer may not
            # select the content itself, and only its hash is wanted here.
            cursor.execute("SELECT digest, content_hash FROM audit_content_hashes(%s)", (chunk,))
            yield from cursor.fetchall()
        else:
            cursor.execute(
                f"SELECT {key}, 'sha256:' || encode(sha256(content), 'hex') FROM {table} "
                f"WHERE {key} = ANY(%s)",
                (chunk,),
            )
            yield from cursor.fetchall()

    def _erased(self, cursor: Any, chunk: list[str]) -> Iterator[tuple[str, str]]:
        """Missing digests that an erasure removed: ``erased_mark(seq)`` of the newest erasure
        event named for each (audit.erasure; checked against that event after the walk)."""
        if self._sqlite:
            marks = ", ".join("?" * len(chunk))
            cursor.execute(
                "SELECT digest, max(erasure_seq) FROM erased_content "
                f"WHERE digest IN ({marks}) GROUP BY digest",
                chunk,
            )
        else:
            cursor.execute(
                "SELECT digest, max(erasure_seq) FROM erased_content WHERE digest = ANY(%s) "
                "GROUP BY digest",
                (chunk,),
            )
        for name, seq in cursor.fetchall():
            yield name, erased_mark(int(seq))

    # -- recorded_at ----------------------------------------------------------------------------

    def same_time(self, seq: int, column: object, text: str, when: datetime) -> bool:
        """Whether the row's ``recorded_at`` (as read by :meth:`pages`) is ``when``, the
        instant its body records as ``text`` (already checked to be the fixed-width form)."""
        if isinstance(column, datetime):
            return column == when  # PostgreSQL: the driver's aware datetime
        if isinstance(column, str) and column == f"{text[:10]} {text[11:26]}":
            return True  # exactly what the store writes for that instant
        return self._typed_time(seq) == when

    def _typed_time(self, seq: int) -> datetime | None:
        with self._backend.reader.connect() as conn:
            try:
                value = conn.execute(
                    select(EVENTS.c.recorded_at).where(EVENTS.c.seq == seq)
                ).scalar_one_or_none()
            except ValueError:  # a stored value the column's type cannot read
                return None
        return value.astimezone(UTC) if value is not None else None


def _retyped(values: Any) -> tuple[Any, ...]:
    fixed = list(values)
    fixed[_BODY] = as_bytes(fixed[_BODY])
    fixed[_PREV] = str(fixed[_PREV])
    fixed[_HASH] = str(fixed[_HASH])
    return tuple(fixed)
