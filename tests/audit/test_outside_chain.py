"""Rows with seq < 1 sit outside the chain: refused by the schema, found by verify, never served.

The attacker (SQLite file owner, PostgreSQL superuser) inserts a well-formed RESPONSE at seq 0
or below. Verify walks seq 1, 2, 3, ... so such a row was invisible to it, while
find_response would serve it as a cached answer.
"""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from audit import AuditStore, DefectKind, EventDraft, EventKind
from audit.store.chain import GENESIS
from audit.verify import verify_log
from tests.audit.conftest import Raw, fill
from tests.audit.test_tamper import _insert, _row

DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)


def _forge_below(raw: Raw, seq: int, *, answer: int = 666) -> str:
    """Copy the RESPONSE at seq 2 (request req-0) to ``seq``, with another answer."""
    row = _row(raw, 2)
    row[0], row[1] = seq, f"{abs(seq):032x}"
    body = row[9]
    assert isinstance(body, bytes)
    row[9] = body.replace(b'"n":0', f'"n":{answer}'.encode())
    _insert(raw, row)
    return str(row[8])  # request_hash


@pytest.mark.parametrize("seq", [0, -3])
def test_schema_refuses_seq_below_one(store: AuditStore, raw: Raw, seq: int) -> None:
    fill(store, requests=1)
    with pytest.raises(DB_ERRORS, match="seq"):
        _forge_below(raw, seq)
    assert raw.execute("SELECT count(*) FROM events")[0][0] == 2


@pytest.mark.parametrize("seq", [0, -3])
def test_verify_reports_rows_outside_the_chain(store: AuditStore, raw: Raw, seq: int) -> None:
    fill(store, requests=2)
    assert verify_log(store).ok
    raw.unguard()
    if raw.dialect == "postgresql":
        raw.execute("ALTER TABLE events DROP CONSTRAINT ck_events_seq_positive")
    _forge_below(raw, seq)
    report = verify_log(store)
    assert not report.ok
    assert report.first_bad_seq == seq
    outside = [d for d in report.defects if d.kind == DefectKind.OUTSIDE_CHAIN]
    assert [d.seq for d in outside] == [seq]
    assert report.events_checked == 4  # the chain itself is whole


def test_rows_outside_the_chain_are_never_served(store: AuditStore, raw: Raw) -> None:
    fill(store, requests=1)
    raw.unguard()
    if raw.dialect == "postgresql":
        raw.execute("ALTER TABLE events DROP CONSTRAINT ck_events_seq_positive")
    # A newer-looking forged answer at seq 0 and one at -1; the real one is at seq 2.
    request_hash = _forge_below(raw, 0)
    _forge_below(raw, -1, answer=667)
    found = store.find_response(request_hash)
    assert found is not None and found.seq == 2
    assert found.data["n"] == 0
    assert [e.seq for e in store.iter_events()] == [1, 2]
    assert [e.seq for e in store.iter_events(after_seq=-10)] == [1, 2]
    assert [e.seq for e in store.events_for_request("req-0")] == [1, 2]
    assert store.head()[0] == 2


def test_a_log_holding_only_a_forged_row_is_not_linked_to(store: AuditStore, raw: Raw) -> None:
    """The next append starts the chain at seq 1 from GENESIS, not after the forged row."""
    fill(store, requests=1)
    forged = _row(raw, 2)
    raw.unguard()
    if raw.dialect == "postgresql":
        raw.execute("ALTER TABLE events DROP CONSTRAINT ck_events_seq_positive")
    raw.execute("DELETE FROM events")
    forged[0] = 0
    _insert(raw, forged)
    appended = store.append(EventDraft(kind=EventKind.REQUEST, request_id="next"))
    assert appended.seq == 1
    assert store.event(1).prev_hash == GENESIS
    kinds = {d.kind for d in verify_log(store).defects}
    assert kinds == {DefectKind.OUTSIDE_CHAIN}
