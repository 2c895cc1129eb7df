"""The replay cache's lookup is answered from the (request_hash, kind, seq) index."""

from __future__ import annotations

import sqlite3

from audit import AuditStore


def test_the_response_lookup_uses_its_index(sqlite_url: str) -> None:
    AuditStore.open(sqlite_url, "os").close()  # created and migrated to head
    db = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    plan = db.execute(
        "EXPLAIN QUERY PLAN SELECT seq FROM events WHERE request_hash = ? AND kind = ? "
        "AND seq >= 1 ORDER BY seq DESC LIMIT 50",
        ("sha256:x", "response"),
    ).fetchall()
    db.close()
    assert any("ix_events_request_hash_kind_seq" in str(row) for row in plan), plan
