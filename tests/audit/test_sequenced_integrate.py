"""Format 2 end to end on real PostgreSQL, with real processes: writers, integrators, attacks.

Writers are separate processes (sequenced_worker.py), the integrator is the real
`gateway audit integrate` command. The attacker is the application role with raw SQL: it may
INSERT into events, and reserve seqs, like any gateway process.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import canonical_bytes
from audit.store.migrate import upgrade
from audit.store.models import DefectKind
from audit.store.roles import grant
from audit.store.sequenced import void_row
from audit.store.signing import Signer, Trust, TrustedKeys, signature_check
from audit.verify import verify_log
from audit.verify.authenticity import check_outcome
from tests.audit.conftest import Raw
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).with_name("sequenced_worker.py")
GATEWAY = Path(sys.executable).with_name("gateway")
INTEGRATOR_KEY = "5e" * 32
INTEGRATOR = Signer.from_text(INTEGRATOR_KEY)
KEYS = [f"{i + 1:02x}" * 32 for i in range(3)]


def _writer(url: str, name: str, threads: int, pairs: int, key: str, *extra: str) -> Any:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, name, str(threads), str(pairs), key, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _integrate(url: str, *args: str, wait: bool = True) -> Any:
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_AUDIT_FORMAT": "2",
        "GATEWAY_INTEGRATOR_KEY": INTEGRATOR_KEY,
    }
    cmd = [str(GATEWAY), "audit", "integrate", "--format", "json", *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _trust(*keys: str) -> Trust:
    """The record keys among ``keys``; the integrator's, if given, as an integrator key
    (GATEWAY_INTEGRATOR_PUBLIC_KEYS), never as a record key."""
    records = [Signer.from_text(k).public_key for k in keys if k != INTEGRATOR_KEY]
    integrator = TrustedKeys.of([INTEGRATOR.public_key]) if INTEGRATOR_KEY in keys else None
    return Trust(TrustedKeys.of(records), integrator=integrator)


def _seqs(url: str) -> list[tuple[int, str]]:
    with AuditStore.open(url, create=False) as store, store._backend.reader.connect() as conn:
        return [(int(s), str(k)) for s, k in conn.exec_driver_sql(
            "SELECT seq, kind FROM events ORDER BY seq"
        )]  # fmt: skip


def _begin(url: str) -> None:
    upgrade(url)
    AuditStore.open(url, log_format=2).close()


def test_three_writer_processes_are_gap_free_integrated_and_verified(pg_url: str) -> None:
    _begin(pg_url)
    writers = [_writer(pg_url, f"p{i}", 8, 12, KEYS[i]) for i in range(3)]
    acked: list[int] = []
    for w in writers:
        out, err = w.communicate(timeout=180)
        assert w.returncode == 0, err
        acked += [int(line) for line in out.split()]
    total = 3 * 8 * 12 * 2
    assert sorted(acked) == list(range(1, total + 1))  # every seq once, no voids needed
    with AuditStore.open(pg_url) as store:
        before = verify_log(store, trust=_trust(*KEYS, INTEGRATOR_KEY))
    assert before.ok, before.defects[:3]
    assert before.pending_integration == total and before.head_seq == 0
    summary = _integrate(pg_url, "--once")
    assert summary == {
        "linked": total, "voided": 0, "head": total, "checkpoint_size": total, "races_lost": 0,
        "warnings": [],
    }  # fmt: skip
    with AuditStore.open(pg_url) as store:
        report = verify_log(store, trust=_trust(*KEYS, INTEGRATOR_KEY))
        assert report.ok, report.defects[:3]
        assert (report.events_checked, report.pending_integration) == (total, 0)
        assert report.head_seq == total
        # The links and the integrator's checkpoint are checked: a key it does not trust
        # makes the checkpoint a finding.
        untrusted = verify_log(store, trust=_trust(*KEYS))
    assert [d.kind for d in untrusted.defects] == [DefectKind.CHECKPOINT]


def test_a_writer_killed_after_nextval_leaves_a_hole_that_is_voided_after_the_grace(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    _begin(pg_url)
    db = pg_url.rsplit("/", 1)[1]
    shared = "the payload a blocked writer waits on"
    digest = "sha256:" + hashlib.sha256(shared.encode()).hexdigest()
    with psycopg.connect(postgres_server.dsn(db)) as blocker:
        # An uncommitted row under the payload's key: the writer's INSERT of that payload
        # waits for this transaction, after its nextval, until it is killed.
        blocker.execute(
            "INSERT INTO payloads (digest, size, content) VALUES (%s, %s, %s)",
            (digest, len(shared), shared.encode()),
        )
        victim = _writer(pg_url, "victim", 1, 1, KEYS[0], shared)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reserved = blocker.execute("SELECT last_value, is_called FROM events_seq").fetchone()
            if reserved is not None and reserved[1]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the writer never reserved its seq")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        # Its server session outlives the client until it next writes to it: ended here, so
        # the blocked INSERT cannot run on (and its transaction commit) once the lock goes.
        with psycopg.connect(postgres_server.dsn(db), autocommit=True) as admin:
            others = "datname = %s AND pid <> pg_backend_pid() AND pid <> %s"
            admin.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {others}",
                          (db, blocker.info.backend_pid))  # fmt: skip
            while admin.execute(f"SELECT count(*) FROM pg_stat_activity WHERE {others}",
                                (db, blocker.info.backend_pid)).fetchone() != (0,):  # fmt: skip
                time.sleep(0.05)
        blocker.rollback()
    for stream in (victim.stdout, victim.stderr):
        assert stream is not None
        stream.close()
    with AuditStore.open(pg_url, signer=Signer.from_text(KEYS[1])) as store:
        later = store.append(EventDraft(kind=EventKind.REQUEST, request_id="later"))
    assert later.seq == 2
    assert _seqs(pg_url) == [(2, "request")]  # seq 1: reserved, never committed
    summary = _integrate(pg_url, "--once", "--grace", "1", "--interval", "0.1")
    assert summary["voided"] == 1 and summary["head"] == 2
    assert _seqs(pg_url) == [(1, "void"), (2, "request")]
    with AuditStore.open(pg_url) as store:
        report = verify_log(store, trust=_trust(*KEYS, INTEGRATOR_KEY))
    assert report.ok, report.defects[:3]


def _app_role(server: PostgresServer, url: str) -> str:
    """The database's application role (as `gateway db grant` makes it); its DSN."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'seq_app'").fetchone() is None:
            conn.execute("CREATE ROLE seq_app LOGIN")
    grant(url, "seq_app")
    return server.dsn(url.rsplit("/", 1)[1], "seq_app")


def test_a_forged_row_and_a_forged_void_by_the_app_role_fail_verify_and_are_never_served(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    _begin(pg_url)
    writer = Signer.from_text(KEYS[0])
    trusted = _trust(KEYS[0], INTEGRATOR_KEY)
    rid, request_hash = "req-1", "sha256:" + "12" * 32
    common = {"request_id": rid, "request_hash": request_hash}
    with AuditStore.open(pg_url, signer=writer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, data={}, **common))
    app = _app_role(postgres_server, pg_url)
    forger = Signer.from_text("66" * 32)  # a key nobody trusts: the attacker's own
    with psycopg.connect(app, autocommit=True) as conn:
        # A RESPONSE for the real request, well formed, at a seq it reserved itself.
        seq = conn.execute("SELECT nextval('events_seq')").fetchone()[0]  # type: ignore[index]
        store_id = conn.execute("SELECT value FROM audit_meta WHERE key = 'store_id'").fetchone()[0]  # type: ignore[index]
        row = void_row(seq, forger, "unused", canonical_bytes("fsync"), store_id=store_id)
        body = row["body"].replace(b'"kind":"void"', b'"kind":"response"')
        body = body.replace(b'"request_hash":null', f'"request_hash":"{request_hash}"'.encode())
        body = body.replace(
            f'"request_id":"{row["request_id"]}"'.encode(), f'"request_id":"{rid}"'.encode()
        )
        body = body.replace(b'{"reason":"unused"}', b'{"ok":true}')
        own = "sha256:" + hashlib.sha256(body).hexdigest()
        conn.execute(
            "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, request_hash, "
            "body, prev_hash, hash, signature, key_id) "
            "VALUES (%s, %s, %s, 'response', %s, %s, %s, '', %s, %s, %s)",
            (
                seq, row["event_id"], rid, row["recorded_at"], request_hash, body, own,
                forger.sign(own, sequenced=True, store_id=store_id), forger.key_id,
            ),
        )  # fmt: skip
        # A void at a seq it reserved (as a writer voids its own after a rollback).
        voided = conn.execute("SELECT nextval('events_seq')").fetchone()[0]  # type: ignore[index]
        forged_void = void_row(
            voided, forger, "rolled back", canonical_bytes("fsync"), store_id=store_id
        )
        conn.execute(
            "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, "
            "prev_hash, hash, signature, key_id) VALUES (%s, %s, %s, 'void', %s, %s, '', %s, "
            "%s, %s)",
            tuple(
                forged_void[c]
                for c in (
                    "seq", "event_id", "request_id", "recorded_at", "body", "hash",
                    "signature", "key_id",
                )
            ),
        )  # fmt: skip
    with AuditStore.open(pg_url, signer=writer) as store:
        # The cache's read path: the newest RESPONSE of the hash is the forged one, and
        # its check refuses it (the gateway serves nothing and raises an integrity alert).
        found = store.find_response(request_hash)
        assert found is not None and found.seq == seq
        problems = check_outcome(
            store, found, signature=signature_check(trusted.keys, store.store_id)
        )
        assert any("not a trusted key" in p for p in problems), problems
    _integrate(pg_url, "--once", "--grace", "0.5", "--interval", "0.1")
    with AuditStore.open(pg_url) as store:
        report = verify_log(store, trust=trusted)
    bad = {(d.seq, d.kind) for d in report.defects}
    assert (seq, DefectKind.UNTRUSTED_SIGNER) in bad
    assert (voided, DefectKind.UNTRUSTED_SIGNER) in bad
    assert not report.ok


def test_a_genuine_format_2_answer_passes_the_read_path_check(pg_url: str) -> None:
    _begin(pg_url)
    writer = Signer.from_text(KEYS[0])
    common = {"request_id": "r", "request_hash": "sha256:" + "34" * 32}
    with AuditStore.open(pg_url, signer=writer) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, data={}, **common))
        store.append(EventDraft(kind=EventKind.RESPONSE, data={"ok": True}, **common))
        found = store.find_response(common["request_hash"])
        assert found is not None
        keys = TrustedKeys.of([writer.public_key])
        check = signature_check(keys, store.store_id)
        assert check_outcome(store, found, signature=check) == []  # pending
        other = TrustedKeys.of([Signer.from_text(KEYS[1]).public_key])
        assert check_outcome(store, found, signature=signature_check(other, store.store_id)) != []
        assert check_outcome(store, found, signature=signature_check(keys, "another-log")) != []


def test_two_integrators_at_once_link_the_log_once(pg_url: str) -> None:
    _begin(pg_url)
    # Both run while the writers write, pass after pass: each batch is raced for.
    both = [_integrate(pg_url, "--interval", "0.02", "--grace", "5", wait=False) for _ in "ab"]
    writers = [_writer(pg_url, f"p{i}", 8, 20, KEYS[i]) for i in range(2)]
    for w in writers:
        _, err = w.communicate(timeout=180)
        assert w.returncode == 0, err
    total = 2 * 8 * 20 * 2
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with psycopg.connect(pg_url.replace("+psycopg", "")) as conn:
            linked = conn.execute("SELECT count(*) FROM chain").fetchone()
        if linked is not None and linked[0] >= total:
            break
        time.sleep(0.1)
    outs = []
    for p in both:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    print("races lost:", [o["races_lost"] for o in outs])
    assert sum(o["linked"] for o in outs) == total  # each link made once, by one of them
    # The one that linked last ends at the head; the other may be told to stop before its
    # next pass has seen those links (it sleeps between passes): it ends at most there.
    assert max(o["head"] for o in outs) == total
    assert all(o["head"] <= total for o in outs)
    with AuditStore.open(pg_url) as store:
        report = verify_log(store, trust=_trust(*KEYS, INTEGRATOR_KEY))
    assert report.ok, report.defects[:3]
    assert report.head_seq == total and report.pending_integration == 0


def test_the_integrator_role_links_and_voids_but_cannot_write_events(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    _begin(pg_url)
    db = pg_url.rsplit("/", 1)[1]
    app = _app_role(postgres_server, pg_url)
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'seq_int'").fetchone() is None:
            conn.execute("CREATE ROLE seq_int LOGIN")
    grant(pg_url, "seq_int", integrator=True)
    with psycopg.connect(postgres_server.dsn(db), autocommit=True) as owner:
        # The database's own grace for the integrator role's voids (migration 0011), as its
        # owner may set it: short, so that this test waits half a second, not thirty.
        owner.execute(
            "CREATE OR REPLACE FUNCTION audit_void_grace() RETURNS interval LANGUAGE sql "
            "IMMUTABLE AS $$ SELECT interval '0.2 seconds' $$"
        )
    with psycopg.connect(app, autocommit=True) as conn:
        conn.execute("SELECT nextval('events_seq')")  # a writer that died after nextval
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO chain VALUES (1, 'p', 'h')")  # links are not the app's
    with AuditStore.open(postgres_server.url(db, "seq_app"), signer=Signer.from_text(KEYS[0])) as s:
        assert s.append(EventDraft(kind=EventKind.REQUEST, request_id="r")).seq == 2
    summary = _integrate(postgres_server.url(db, "seq_int"), "--once", "--grace", "0.5")
    assert (summary["voided"], summary["head"]) == (1, 2)
    with (
        psycopg.connect(postgres_server.dsn(db, "seq_int"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        # Only voids: row-level security refuses any other kind from the integrator (a
        # well-formed row, so that the chain guard lets it through to the policy).
        row = void_row(1, INTEGRATOR, "x", canonical_bytes("fsync"), store_id="any")
        body = row["body"].replace(b'"kind":"void"', b'"kind":"response"')
        conn.execute(
            "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, "
            "prev_hash, hash) VALUES (1, %s, %s, 'response', %s, %s, '', %s)",
            (
                row["event_id"], row["request_id"], row["recorded_at"], body,
                "sha256:" + hashlib.sha256(body).hexdigest(),
            ),
        )  # fmt: skip
    with AuditStore.open(pg_url) as store:
        assert verify_log(store, trust=_trust(KEYS[0], INTEGRATOR_KEY)).ok


def test_audit_show_marks_an_event_pending_until_it_is_integrated(pg_url: str) -> None:
    _begin(pg_url)
    with AuditStore.open(pg_url, signer=Signer.from_text(KEYS[0])) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r-show"))
    env = {**os.environ, "GATEWAY_DATABASE_URL": pg_url, "GATEWAY_RECORD_KEY": KEYS[0]}

    def show(fmt: str) -> str:
        cmd = [str(GATEWAY), "audit", "show", "r-show", "--format", fmt]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert json.loads(show("json"))["events"][0]["pending_integration"] is True
    assert "(pending integration)" in show("text")
    verify = [str(GATEWAY), "audit", "verify"]
    done = subprocess.run(verify, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 event(s) pending integration (checked" in done.stdout
    _integrate(pg_url, "--once")
    assert "pending_integration" not in json.loads(show("json"))["events"][0]
    assert "(pending integration)" not in show("text")


def test_a_log_switched_from_format_1_links_on_and_a_changed_body_is_found(pg_url: str) -> None:
    upgrade(pg_url)
    writer = Signer.from_text(KEYS[0])
    with AuditStore.open(pg_url, signer=writer) as store:  # format 1 first
        for n in range(2):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"old-{n}"))
        v1_head = store.head()
    with AuditStore.open(pg_url, signer=writer, log_format=2) as store:
        for n in range(3):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"new-{n}"))
    _integrate(pg_url, "--once")
    raw = Raw(pg_url)
    try:
        first = raw.execute("SELECT prev_hash FROM chain WHERE seq = 3")
        assert first == [(v1_head[1],)]  # one chain across the two formats
        with AuditStore.open(pg_url) as store:
            report = verify_log(store, trust=_trust(KEYS[0], INTEGRATOR_KEY))
            assert report.ok, report.defects[:3]
            assert (report.events_checked, report.head_seq, report.sequenced_from) == (5, 5, 3)
        raw.unguard()  # the tables' owner edits a format-2 body
        body = raw.body(4).replace(b"new-1", b"new-X")
        raw.execute("UPDATE events SET body = ? WHERE seq = 4", (body,))
        with AuditStore.open(pg_url) as store:
            kinds = {(d.seq, d.kind) for d in verify_log(store, trust=_trust(KEYS[0])).defects}
        assert (4, DefectKind.HASH_MISMATCH) in kinds
    finally:
        raw.close()
