"""PostgreSQL appends in one round trip: a writer that committed the head sends BEGIN, the
chain lock, the inserts and COMMIT together; another writer's append in between is refused
by the chain guard and sent again after reading the head, so the chain stays one.

Round trips are counted from libpq's protocol trace of the store's connections (each run of
client messages after a server answer is one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from audit import AuditStore, EventDraft, EventKind
from audit.store.migrate import upgrade
from audit.verify import verify_log

pytestmark = pytest.mark.postgres


@pytest.fixture
def migrated(pg_url: str) -> str:
    upgrade(pg_url)
    return pg_url


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Path]:
    """Every PostgreSQL connection opened meanwhile writes libpq's trace to the file."""
    path = tmp_path / "trace.txt"
    out = path.open("w")

    def trace(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.pgconn.trace(out.fileno())

    event.listen(Engine, "connect", trace)
    try:
        yield path
    finally:
        event.remove(Engine, "connect", trace)
        out.close()


def _round_trips(trace: Path) -> int:
    directions = [line.split("\t")[1] for line in trace.read_text().splitlines() if "\t" in line]
    return sum(
        1 for n, d in enumerate(directions) if d == "F" and (n == 0 or directions[n - 1] == "B")
    )


def _draft(n: int) -> EventDraft:
    return EventDraft(
        kind=EventKind.REQUEST,
        request_id=f"r{n}",
        data={"n": n},
        payloads={"request": f"body {n}".encode()},
    )


def test_an_append_after_this_writers_own_is_one_round_trip(migrated: str, traced: Path) -> None:
    with AuditStore.open(migrated) as store:
        store.append(_draft(0))  # reads the head (and what role it has): more round trips
        before = _round_trips(traced)
        for n in range(1, 6):
            store.append(_draft(n))
        assert (
            _round_trips(traced) - before == 5
        )  # was 6 each: BEGIN, lock, head, 2 inserts, COMMIT
        assert [e.seq for e in store.iter_events()] == list(range(1, 7))


def test_two_writers_in_turn_keep_one_chain(migrated: str) -> None:
    """Each append finds the head moved by the other writer: refused, read, sent again."""
    with AuditStore.open(migrated) as one, AuditStore.open(migrated) as other:
        for n in range(20):
            (one if n % 2 == 0 else other).append(_draft(n))
        one.append(_draft(20))
        assert [e.request_id for e in one.iter_events()] == [f"r{n}" for n in range(21)]
        assert verify_log(one).ok
