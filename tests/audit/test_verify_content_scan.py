"""Verify reads a page's payloads on SQLite in one scan of their rowid range (a page's
payloads were mostly inserted together), looking up the others by digest: the verdict is
the one the lookups alone give, for edited, deleted and older (deduplicated) payloads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from audit import AuditStore, DefectKind, EventDraft, EventKind
from audit.verify import verify_log
from audit.verify.body import parse_body

EVENTS = 300


def _draft(n: int, content: bytes) -> EventDraft:
    return EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}", payloads={"request_body": content})


def test_the_scan_finds_what_lookups_find(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    url = f"sqlite:///{path}"
    with AuditStore.open(url, "os") as store:
        # Each event its own payload, but every tenth one an old payload again (stored once).
        store.append_many(
            [_draft(n, b"old" if n % 10 == 9 else b"payload %d" % n) for n in range(EVENTS)]
        )
    with sqlite3.connect(path, isolation_level=None) as raw:
        for (name,) in list(raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")):
            raw.execute(f"DROP TRIGGER {name}")

        def ref(seq: int) -> str:
            (body,) = raw.execute("SELECT body FROM events WHERE seq = ?", (seq,)).fetchone()
            parsed = parse_body(body)
            assert isinstance(parsed, dict)
            return str(parsed["payloads"]["request_body"])

        raw.execute("UPDATE payloads SET content = x'00' WHERE digest = ?", (ref(151),))
        raw.execute("DELETE FROM payloads WHERE digest = ?", (ref(121),))
        raw.execute("UPDATE payloads SET content = x'01' WHERE digest = ?", (ref(10),))  # "old"
    with AuditStore.open(url, "os") as store:
        scanned = verify_log(store, jobs=1)  # one page of 300 references: scanned
        looked_up = verify_log(store, jobs=1, page_rows=20)  # 20 a page: looked up one by one
    assert scanned == looked_up
    found = {(d.seq, d.kind) for d in scanned.defects}
    assert {(151, DefectKind.CONTENT_MISMATCH), (121, DefectKind.MISSING_CONTENT)} <= found
    old = {seq for seq, kind in found if kind is DefectKind.CONTENT_MISMATCH} - {151}
    assert old == set(range(10, EVENTS + 1, 10))  # every event that references the old one
