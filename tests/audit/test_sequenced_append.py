"""Format 2 (PostgreSQL): migration 0010, the sequenced writer, its guard and its voids."""

from __future__ import annotations

import hashlib

import psycopg
import pytest
from sqlalchemy import create_engine

from audit import AppendFailed, AuditStore, EventDraft, EventKind
from audit.errors import LogFormatUnsupported
from audit.store.migrate import downgrade_engine, upgrade, upgrade_engine
from audit.store.signing import SEQUENCED_DOMAIN, Signer, TrustedKeys
from audit.verify import verify_log
from tests.audit.conftest import Raw

WRITER = Signer.from_text("a1" * 32)


def _draft(n: int, kind: EventKind = EventKind.REQUEST, **extra: object) -> EventDraft:
    return EventDraft(
        kind=kind,
        request_id=f"req-{n}",
        task="compliance_review",
        caller="payments-svc",
        request_hash=f"sha256:{n:064x}",
        data={"n": n},
        payloads={"body": f"body {n} {kind.value}".encode()},
        **extra,
    )


def test_format_2_on_sqlite_is_refused_in_one_line(sqlite_url: str) -> None:
    with pytest.raises(LogFormatUnsupported, match="needs PostgreSQL") as caught:
        AuditStore.open(sqlite_url, log_format=2)
    assert "\n" not in str(caught.value)
    with pytest.raises(LogFormatUnsupported, match="does not exist"):
        AuditStore.open(sqlite_url, log_format=3)


@pytest.mark.postgres
def test_upgrade_from_0009_with_data_keeps_format_1_and_downgrades(pg_url: str) -> None:
    upgrade(pg_url)
    with AuditStore.open(pg_url, signer=WRITER) as store:
        for n in range(3):
            store.append(_draft(n))
    engine = create_engine(pg_url)
    try:
        downgrade_engine(engine, "0009")  # a log of 0009's, with its events
        upgrade_engine(engine, "head")
    finally:
        engine.dispose()
    with AuditStore.open(pg_url, signer=WRITER) as store:
        assert store.sequenced_from is None  # format 1 until a format-2 store opens it
        assert store.append(_draft(3)).seq == 4
        assert verify_log(store).ok


@pytest.mark.postgres
def test_sequenced_rows_stand_alone_and_are_signed_under_their_own_domain(pg_url: str) -> None:
    upgrade(pg_url)
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(_draft(0))
        store.append(_draft(0, EventKind.RESPONSE))
    with AuditStore.open(pg_url, signer=WRITER, log_format=2) as store:
        assert store.sequenced_from == 3
        got = [store.append(_draft(n)) for n in (1, 2)]
        store_id = store.store_id
    assert [a.seq for a in got] == [3, 4]
    raw = Raw(pg_url)
    try:
        for a in got:
            body, prev, own, sig, kid = raw.execute(
                "SELECT body, prev_hash, hash, signature, key_id FROM events WHERE seq = ?",
                (a.seq,),
            )[0]
            assert prev == ""
            assert own == "sha256:" + hashlib.sha256(bytes(body)).hexdigest() == a.hash
            keys = TrustedKeys.of([WRITER.public_key])
            assert keys.check(kid, sig, own, sequenced=True, store_id=store_id) is None
            assert keys.check(kid, sig, own) is not None  # never a format-1 signature
            # Bound to its log: not a valid row of another log that trusts the same key.
            other = store_id[:-1] + ("0" if store_id[-1] != "0" else "1")
            assert keys.check(kid, sig, own, sequenced=True, store_id=other) is not None
        assert SEQUENCED_DOMAIN.startswith(b"compliance-gateway audit event v2")
        # A format-1 store opened later appends format 2: the log stays in it.
        with AuditStore.open(pg_url, signer=WRITER) as store:
            assert store.sequenced_from == 3
            assert store.append(_draft(3)).seq == 5
        # The era is recorded once; downgrading below 0010 is refused from now on.
        engine = create_engine(pg_url)
        try:
            with pytest.raises(RuntimeError, match="format 2 from seq 3"):
                downgrade_engine(engine, "0009")
        finally:
            engine.dispose()
    finally:
        raw.close()


@pytest.mark.postgres
def test_guard_refuses_linked_rows_and_unreserved_seqs_in_format_2(pg_url: str) -> None:
    upgrade(pg_url)
    with AuditStore.open(pg_url, signer=WRITER, log_format=2) as store:
        appended = store.append(_draft(0))
    raw = Raw(pg_url)
    try:
        body = raw.body(appended.seq)
        forged = body.replace(b'"seq":1', b'"seq":7')
        own = "sha256:" + hashlib.sha256(forged).hexdigest()
        insert = (
            "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, task, caller, "
            "policy_fingerprint, request_hash, body, prev_hash, hash) SELECT ?, 'x' || ?, "
            "request_id, kind, recorded_at, task, caller, policy_fingerprint, request_hash, ?, "
            "?, ? FROM events WHERE seq = 1"
        )
        with pytest.raises(psycopg.errors.CheckViolation, match="was not reserved"):
            raw.execute(insert, (7, 7, forged, "", own))
        raw.execute("SELECT nextval('events_seq') FROM generate_series(1, 6)")
        with pytest.raises(psycopg.errors.CheckViolation, match="no prev_hash"):
            raw.execute(insert, (7, 7, forged, appended.hash, own))
        with pytest.raises(psycopg.errors.CheckViolation, match=r"not sha256\(body\)"):
            raw.execute(insert, (7, 7, forged, "", appended.hash))
    finally:
        raw.close()


@pytest.mark.postgres
def test_a_rolled_back_append_voids_its_own_seqs(pg_url: str) -> None:
    upgrade(pg_url)
    draft = _draft(5)
    content = draft.payloads["body"]
    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    raw = Raw(pg_url)
    try:
        # Planted by the tables' owner with the triggers off: other bytes under the digest of
        # the draft's payload, so the chain guard refuses the event and the append rolls back
        # after taking its seq.
        raw.unguard()
        raw.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (?, ?, ?)",
            (digest, 5, b"other"),
        )
    finally:
        raw.close()
    with AuditStore.open(pg_url, signer=WRITER, log_format=2) as store:
        with pytest.raises(AppendFailed):
            store.append(draft)
        after = store.append(_draft(6))
    raw = Raw(pg_url)
    try:
        rows = raw.execute("SELECT seq, kind, body, signature, key_id, hash FROM events")
    finally:
        raw.close()
    assert [(s, k) for s, k, *_ in sorted(rows)] == [(1, "void"), (2, "request")]
    assert after.seq == 2
    _, _, body, sig, kid, own = sorted(rows)[0]
    assert b'"reason":"rolled back"' in bytes(body)
    with AuditStore.open(pg_url) as store:
        store_id = store.store_id
    keys = TrustedKeys.of([WRITER.public_key])
    assert keys.check(kid, sig, own, sequenced=True, store_id=store_id) is None
