"""Follow the log by seq without ever skipping an event that commits late.

    follower = LogFollower(store, kinds=(EventKind.CALLER_KEY, EventKind.CALLER_KEY_REVOKED))
    for event in follower.read():        # the matching events not read before, in seq order
        ...

Under format 1 a seq commits only after every seq below it, so "everything after the last
seq I saw" is enough. Under format 2 (audit.store.sequenced) writers take their seqs from a
sequence and commit in any order: seq 41 may commit after seq 42 was read. A reader that
keeps only a high-water mark then skips 41 for good (a caller key's revocation that never
applies). So a follower keeps, besides the head it read up to, the seqs below it that held
no row when it read (its gaps), and reads each gap again until a row fills it: the writer's
event, or the void that the writer or the integrator writes for a seq that never commits.

Each read first notes which seqs hold a row, then reads the matching events among exactly
those seqs: a row that commits between the two statements is still a gap, read next time,
so no event is returned twice and none is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from sqlalchemy import Connection, select, text

from audit.store._reads import stored_event
from audit.store._store import AuditStore
from audit.store.chain import EventRow
from audit.store.models import EventKind, StoredEvent
from audit.store.schema import EVENTS
from audit.store.sequenced import sequenced_from

GAP_CHUNK = 1000  # gap seqs asked about per statement


class LogFollower:
    """The events of ``kinds`` a reader has not read yet, in seq order, late commits included."""

    def __init__(self, store: AuditStore, *, kinds: Sequence[EventKind]) -> None:
        self._store = store
        self._kinds = [EventKind(k).value for k in kinds]
        self._seen = 0  # every seq up to here has been read, but those in _gaps
        self._gaps: set[int] = set()

    @property
    def gaps(self) -> frozenset[int]:
        """Seqs at or below the head read so far that held no row yet (tests, diagnostics)."""
        return frozenset(self._gaps)

    def read(self) -> list[StoredEvent]:
        """The matching events that committed since the last read, whatever their seq."""
        backend = self._store.backend
        head = int(self._store.head()[0])
        seen, old_gaps = self._seen, sorted(self._gaps)
        with backend.reader.connect() as conn:
            # Format 1 commits in seq order, and so does the format-1 part of a format-2 log:
            # gaps can only be at or after the era's first seq.
            era = sequenced_from(conn)
            low = seen if era is None else max(seen, era - 1)
            new_gaps = _gaps_in(conn, low, head) if era is not None and head > low else set()
            filled: set[int] = set()
            for chunk in _chunks(old_gaps):
                filled.update(
                    conn.execute(select(EVENTS.c.seq).where(EVENTS.c.seq.in_(chunk))).scalars()
                )
            wanted = EVENTS.c.kind.in_(self._kinds)
            rows: list[EventRow] = []
            if head > seen:
                rows += EventRow.from_result(
                    conn.execute(
                        select(EVENTS).where(wanted, EVENTS.c.seq > seen, EVENTS.c.seq <= head)
                    )
                )
            for chunk in _chunks(sorted(filled)):
                rows += EventRow.from_result(
                    conn.execute(select(EVENTS).where(wanted, EVENTS.c.seq.in_(chunk)))
                )
        # A row that committed after its gap was noted stays a gap: it is read next time,
        # and only then, so it is returned once.
        rows = [r for r in rows if r.seq not in new_gaps and r.seq >= 1]
        rows.sort(key=lambda r: r.seq)
        self._gaps = (self._gaps - filled) | new_gaps
        self._seen = max(seen, head)
        return [stored_event(row) for row in rows]


# The missing seqs of (seen, head]: the run before the first row, then the run after each
# row whose successor is missing, up to the next row (or the head). Computed by the database
# from the seq index, so a read costs the gaps it finds, not the rows it passes.
_RUNS = text(
    "SELECT e.seq AS after, (SELECT min(f.seq) FROM events f WHERE f.seq > e.seq) AS upto "
    "FROM events e WHERE e.seq > :seen AND e.seq < :head "
    "AND NOT EXISTS (SELECT 1 FROM events g WHERE g.seq = e.seq + 1)"
)
_FIRST = text("SELECT min(seq) FROM events WHERE seq > :seen AND seq <= :head")


def _gaps_in(conn: Connection, seen: int, head: int) -> set[int]:
    bounds = {"seen": seen, "head": head}
    first = conn.execute(_FIRST, bounds).scalar()
    if first is None:
        return set(range(seen + 1, head + 1))
    gaps = set(range(seen + 1, int(first)))
    for after, upto in conn.execute(_RUNS, bounds):
        end = head + 1 if upto is None else min(int(upto), head + 1)
        gaps.update(range(int(after) + 1, end))
    return gaps


def _chunks(seqs: Iterable[int]) -> Iterator[list[int]]:
    items = list(seqs)
    for start in range(0, len(items), GAP_CHUNK):
        yield items[start : start + GAP_CHUNK]
