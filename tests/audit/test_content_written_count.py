"""SQLite: a content row is read back and compared only when the insert wrote fewer rows than
it was given, so a row written ahead must be caught even beside new rows in the same append
(the count falls short by one), and matching rows written ahead are no conflict."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import digest
from audit.errors import ContentConflict
from audit.verify import verify_log

NEW = b'{"prompt": "a body nobody has seen"}'
AHEAD = b'{"prompt": "a body someone stored first"}'


def _write_ahead(path: Path, content: bytes, stored: bytes) -> None:
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (?, ?, ?)",
            (digest(content), len(stored), stored),
        )
    finally:
        raw.close()


def _draft(rid: str) -> EventDraft:
    return EventDraft(
        kind=EventKind.REQUEST, request_id=rid, payloads={"new": NEW + rid.encode(), "a": AHEAD}
    )


def test_a_row_written_ahead_beside_new_rows_fails_the_append_closed(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with AuditStore.open(f"sqlite:///{path}") as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="first"))
        _write_ahead(path, AHEAD, b"other bytes")
        with pytest.raises(ContentConflict) as caught:
            store.append(_draft("r1"))
        assert caught.value.digests == (digest(AHEAD),)
        assert store.head()[0] == 1  # nothing written, not even the new row


def test_matching_rows_written_ahead_beside_new_rows_are_no_conflict(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with AuditStore.open(f"sqlite:///{path}") as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="first"))
        _write_ahead(path, AHEAD, AHEAD)
        assert store.append(_draft("r1")).seq == 2
        assert store.payload(digest(NEW + b"r1")) == NEW + b"r1"
        assert verify_log(store).ok
