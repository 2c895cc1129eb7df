"""The tamper matrix: every way of changing the log is refused or found, and the seq named.

Each case breaks a six-event log the way an attacker with the file (SQLite) or a superuser
(PostgreSQL) could, then expects verify to report the first bad seq and the kind of defect.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import psycopg
import pytest

from audit import AuditStore, DefectKind
from audit.proofs import checkpoint as checkpoints
from audit.proofs import take_checkpoint
from audit.store.chain import link_hash
from audit.verify import verify_log
from tests.audit.conftest import Raw, fill

COLUMNS = (
    "seq, event_id, request_id, kind, recorded_at, task, caller, policy_fingerprint, "
    "request_hash, body, prev_hash, hash"
)
DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)


def _row(raw: Raw, seq: int) -> list[object]:
    return list(raw.execute(f"SELECT {COLUMNS} FROM events WHERE seq = ?", (seq,))[0])


def _insert(raw: Raw, row: list[object], verb: str = "INSERT") -> None:
    marks = ", ".join("?" for _ in row)
    raw.execute(f"{verb} INTO events ({COLUMNS}) VALUES ({marks})", tuple(row))


def _renumber(raw: Raw, old: int, new: int) -> None:
    raw.execute("UPDATE events SET seq = ? WHERE seq = ?", (new, old))


def body_byte(raw: Raw) -> None:
    body = raw.body(3).replace(b'"n":1', b'"n":7')
    raw.execute("UPDATE events SET body = ? WHERE seq = 3", (body,))


def searchable_column(raw: Raw) -> None:
    raw.execute("UPDATE events SET caller = 'someone-else' WHERE seq = 3")


def stored_hash(raw: Raw) -> None:
    raw.execute("UPDATE events SET hash = ? WHERE seq = 3", ("sha256:" + "f" * 64,))


def recorded_time(raw: Raw) -> None:
    if raw.dialect == "sqlite":  # stored as text there
        raw.execute("UPDATE events SET recorded_at = '2001-01-01 00:00:00.000000' WHERE seq = 3")
    else:
        raw.execute("UPDATE events SET recorded_at = recorded_at - INTERVAL '1 day' WHERE seq = 3")


def prev_hash_not_ascii(raw: Raw) -> None:
    raw.execute("UPDATE events SET prev_hash = ? WHERE seq = 3", ("sha256:\u00e9",))


def hash_not_ascii(raw: Raw) -> None:
    """The next row names it as its prev_hash: a link that holds, over a hash that is not one."""
    raw.execute("UPDATE events SET hash = ? WHERE seq = 2", ("sha256:\u00e9",))
    raw.execute("UPDATE events SET prev_hash = ? WHERE seq = 3", ("sha256:\u00e9",))


def delete_middle(raw: Raw) -> None:
    raw.execute("DELETE FROM events WHERE seq = 3")


def forge_in_middle(raw: Raw) -> None:
    # Make room at seq 4, then insert a well-formed event that links to seq 3.
    for seq in (6, 5, 4):
        _renumber(raw, seq, seq + 1)
    forged = _row(raw, 3)
    body = forged[9]
    assert isinstance(body, bytes)
    event_id = str(forged[1]).encode()
    forged_body = (
        body.replace(b'"seq":3', b'"seq":4')
        .replace(b'"n":1', b'"n":9')
        .replace(event_id, b"f" * 32)
    )
    forged[0], forged[1], forged[9] = 4, "f" * 32, forged_body
    forged[10] = forged[11]
    forged[11] = link_hash(str(forged[10]), forged_body)
    _insert(raw, forged)


def forge_at_tail(raw: Raw) -> None:
    row = _row(raw, 6)
    row[0], row[1], row[10] = 7, "e" * 32, row[11]
    _insert(raw, row)  # body claims seq 6 and hash is not recomputed


def reorder(raw: Raw) -> None:
    _renumber(raw, 3, 100)
    _renumber(raw, 4, 3)
    _renumber(raw, 100, 4)


def duplicate(raw: Raw) -> None:
    row = _row(raw, 3)
    row[0], row[1] = 7, "d" * 32
    _insert(raw, row)


def payload_bytes(raw: Raw) -> None:
    event_body = raw.body(4).decode()
    ref = event_body.split('"response_body":"')[1].split('"')[0]
    raw.execute("UPDATE payloads SET content = ? WHERE digest = ?", (b'{"answer": 666}', ref))


def payload_deleted(raw: Raw) -> None:
    event_body = raw.body(4).decode()
    ref = event_body.split('"response_body":"')[1].split('"')[0]
    raw.execute("DELETE FROM payloads WHERE digest = ?", (ref,))


def policy_rewritten(raw: Raw) -> None:
    raw.execute("UPDATE policies SET content = ?", (b'{"task":"anything-goes"}',))


# (case, first bad seq, a defect kind that must be among those reported at that seq)
MATRIX: list[tuple[Callable[[Raw], None], int, DefectKind]] = [
    (body_byte, 3, DefectKind.HASH_MISMATCH),
    (searchable_column, 3, DefectKind.COLUMN_MISMATCH),
    (stored_hash, 3, DefectKind.HASH_MISMATCH),
    (recorded_time, 3, DefectKind.COLUMN_MISMATCH),
    (prev_hash_not_ascii, 3, DefectKind.BROKEN_LINK),
    (hash_not_ascii, 2, DefectKind.HASH_MISMATCH),
    (delete_middle, 3, DefectKind.GAP),
    (forge_in_middle, 5, DefectKind.BROKEN_LINK),
    (forge_at_tail, 7, DefectKind.HASH_MISMATCH),
    (reorder, 3, DefectKind.SEQUENCE),
    (duplicate, 7, DefectKind.BROKEN_LINK),
    (payload_bytes, 4, DefectKind.CONTENT_MISMATCH),
    (payload_deleted, 4, DefectKind.MISSING_CONTENT),
    (policy_rewritten, 1, DefectKind.CONTENT_MISMATCH),
]


@pytest.mark.parametrize("tamper", [m[0] for m in MATRIX], ids=[m[0].__name__ for m in MATRIX])
def test_verify_names_the_first_bad_seq(
    store: AuditStore, raw: Raw, tamper: Callable[[Raw], None]
) -> None:
    _, first_bad, kind = next(m for m in MATRIX if m[0] is tamper)
    fill(store)
    assert verify_log(store).ok
    raw.unguard()
    tamper(raw)
    report = verify_log(store)
    assert not report.ok
    assert report.first_bad_seq == first_bad
    assert kind in {d.kind for d in report.defects if d.seq == first_bad}


def test_truncated_tail_verifies_alone_but_not_against_a_checkpoint(
    store: AuditStore, raw: Raw
) -> None:
    fill(store)
    key = bytes(range(32))
    cp = checkpoints.loads(
        checkpoints.dumps(take_checkpoint(store, key)),
        trusted_public_key=checkpoints.public_key(key),
    )
    assert cp.seq == 7  # the checkpoint event itself is in the signed head
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq >= 6")
    assert verify_log(store).ok  # a hash chain alone cannot see a missing tail
    report = verify_log(store, checkpoint=cp)
    assert not report.ok
    assert report.first_bad_seq == 6
    assert report.defects[0].kind == DefectKind.CHECKPOINT


def test_rollback_to_a_rewritten_history_is_found_by_the_checkpoint(
    store: AuditStore, raw: Raw
) -> None:
    fill(store)
    cp = take_checkpoint(store, bytes(range(32)))
    # Rebuild seq 7 (the checkpoint event) as something else with a self-consistent chain.
    raw.unguard()
    row = list(raw.execute(f"SELECT {COLUMNS} FROM events WHERE seq = 7")[0])
    raw.execute("DELETE FROM events WHERE seq = 7")
    body = bytes(row[9]).replace(b'"signed":true', b'"signed":false')
    row[9], row[11] = body, link_hash(str(row[10]), body)
    _insert(raw, row)
    report = verify_log(store, checkpoint=cp)
    assert [d.kind for d in report.defects] == [DefectKind.CHECKPOINT]
    assert report.first_bad_seq == 7


def test_guards_refuse_update_and_delete_on_every_table(store: AuditStore, raw: Raw) -> None:
    fill(store)
    for sql in (
        "UPDATE events SET caller = 'x' WHERE seq = 1",
        "DELETE FROM events WHERE seq = 6",
        "UPDATE payloads SET content = ?",
        "DELETE FROM payloads",
        "UPDATE policies SET content = ?",
        "DELETE FROM policies",
        "UPDATE audit_meta SET value = 'other'",
    ):
        params = (b"x",) if "?" in sql else ()
        with pytest.raises(DB_ERRORS, match="append-only"):
            raw.execute(sql, params)
    assert verify_log(store).ok


def test_replace_and_upsert_cannot_overwrite_an_event(store: AuditStore, raw: Raw) -> None:
    fill(store)
    row = _row(raw, 3)
    row[1], row[6] = "z" * 32, "mallory"
    marks = ", ".join("?" for _ in row)
    attempts = [f"INSERT INTO events ({COLUMNS}) VALUES ({marks}) "
                "ON CONFLICT (seq) DO UPDATE SET caller = 'mallory'"]  # fmt: skip
    if raw.dialect == "sqlite":
        attempts.append(f"INSERT OR REPLACE INTO events ({COLUMNS}) VALUES ({marks})")
        attempts.append(f"REPLACE INTO events ({COLUMNS}) VALUES ({marks})")
    for sql in attempts:
        # PostgreSQL's chain guard (0005) refuses the insert before the conflict is seen
        with pytest.raises(DB_ERRORS, match=r"append-only|audit chain"):
            raw.execute(sql, tuple(row))
    assert _row(raw, 3)[6] == "payments-svc"
    assert verify_log(store).ok


def test_replace_without_the_guards_is_found(store: AuditStore, raw: Raw) -> None:
    if raw.dialect != "sqlite":
        pytest.skip("REPLACE is SQLite syntax")
    fill(store)
    raw.unguard()
    row = _row(raw, 3)
    row[1], row[6] = "z" * 32, "mallory"
    _insert(raw, row, verb="INSERT OR REPLACE")
    report = verify_log(store)
    assert report.first_bad_seq == 3
    assert DefectKind.COLUMN_MISMATCH in {d.kind for d in report.defects}


def test_dropping_the_triggers_then_updating_is_found(store: AuditStore, raw: Raw) -> None:
    fill(store)
    if raw.dialect == "sqlite":
        raw.unguard()
    else:
        raw.execute("DROP TRIGGER events_append_only ON events")
    raw.execute("UPDATE events SET task = 'renamed' WHERE seq = 5")
    report = verify_log(store)
    assert report.first_bad_seq == 5
    assert report.defects[0].kind == DefectKind.COLUMN_MISMATCH


def test_deleting_the_checkpointed_event_itself_is_named(store: AuditStore, raw: Raw) -> None:
    fill(store)
    cp = take_checkpoint(store, bytes(range(32)))
    fill(store, requests=1)  # the log goes on past the checkpoint
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq = ?", (cp.seq,))
    report = verify_log(store, checkpoint=cp)
    assert report.first_bad_seq == cp.seq
    assert {DefectKind.GAP, DefectKind.CHECKPOINT} <= {d.kind for d in report.defects}
