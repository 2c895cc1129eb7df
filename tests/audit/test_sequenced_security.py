"""Format 2 under attack by the roles that share its database (security review 2).

Real PostgreSQL, real roles as `gateway db grant` makes them, raw SQL as each attacker. The
integrator runs in-process (audit.sequenced.integrator.Integrator) so a pass can be driven one at a
time; test_sequenced_integrate.py runs the real command.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from audit import AuditStore, AuditStoreError, EventDraft, EventKind
from audit.canonical import canonical_bytes
from audit.proofs import checkpoint as cp
from audit.proofs.merkle import event_leaf, tree_head
from audit.sequenced.integrator import (
    RESERVED_AHEAD_WARN,
    VOID_PAGE,
    IntegrationBlocked,
    Integrator,
)
from audit.store.migrate import upgrade
from audit.store.models import DefectKind, VerifyReport
from audit.store.roles import grant
from audit.store.sequenced import void_row
from audit.store.signing import Signer, Trust, TrustedKeys, signature_check
from audit.verify import verify_log
from audit.verify.authenticity import check_outcome
from gateway.evidence import Auditing
from gateway.keys import trusted_record_keys
from gateway.settings import Settings
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

GATEWAY = Path(sys.executable).with_name("gateway")

INTEGRATOR_KEY = "5e" * 32
INTEGRATOR = Signer.from_text(INTEGRATOR_KEY)
WRITER_KEY = "01" * 32
WRITER = Signer.from_text(WRITER_KEY)


def trust() -> Trust:
    """What an operator configures: the record keys, and the integrator's apart."""
    return Trust(
        TrustedKeys.of([WRITER.public_key]), integrator=TrustedKeys.of([INTEGRATOR.public_key])
    )


def begin(url: str, events: int = 0) -> None:
    upgrade(url)
    AuditStore.open(url, log_format=2).close()
    with AuditStore.open(url, signer=WRITER) as store:
        for n in range(events):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}"))


def role(server: PostgresServer, url: str, name: str, **kind: bool) -> str:
    """A role granted as `gateway db grant` does; its DSN."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {name} LOGIN")
    grant(url, name, **kind)
    return server.dsn(url.rsplit("/", 1)[1], name)


def integrator(store: AuditStore, **options: float) -> Integrator:
    options = {"grace_s": 0.2, "checkpoint_every_s": 0.0, **options}
    return Integrator(store, bytes.fromhex(INTEGRATOR_KEY), **options)  # type: ignore[arg-type]


def integrate(url: str, **options: float) -> None:
    with AuditStore.open(url, log_format=2) as store:
        integrator(store, **options).run(0.05, threading.Event(), once=True)


def verify(url: str, with_trust: Trust | None = None) -> VerifyReport:
    with AuditStore.open(url) as store:
        return verify_log(store, trust=with_trust or trust())


def true_root(url: str, size: int) -> bytes:
    with AuditStore.open(url) as store, store._backend.reader.connect() as conn:
        hashes = conn.exec_driver_sql(
            f"SELECT hash FROM events WHERE seq <= {size} ORDER BY seq"
        ).scalars()
        return tree_head([event_leaf(h) for h in hashes]).root


def latest_checkpoint(url: str) -> tuple[int, bytes]:
    with AuditStore.open(url) as store, store._backend.reader.connect() as conn:
        size, text = conn.exec_driver_sql(
            "SELECT size, checkpoint FROM chain_checkpoints ORDER BY size DESC LIMIT 1"
        ).one()
    signed = cp.loads(text)
    assert signed.root is not None
    return int(size), base64.b64decode(signed.root)


def kinds(report: VerifyReport) -> set[tuple[int | None, DefectKind]]:
    return {(d.seq, d.kind) for d in report.defects}


# -- 1. the Merkle root the integrator signs ----------------------------------------------------


@pytest.mark.parametrize("who", ["app", "reviewer"])
def test_the_app_and_reviewer_roles_cannot_plant_merkle_nodes(
    pg_url: str, postgres_server: PostgresServer, who: str
) -> None:
    begin(pg_url, events=4)
    dsn = role(postgres_server, pg_url, f"plant_{who}", read_only=who == "reviewer")
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(
            "INSERT INTO merkle_nodes (level, node_index, hash) VALUES (0, 3, %s)", (b"\7" * 32,)
        )


@pytest.mark.parametrize("where", ["inside", "far ahead"])
def test_a_planted_merkle_node_changes_neither_the_signed_root_nor_stops_checkpoints(
    pg_url: str, postgres_server: PostgresServer, where: str
) -> None:
    """The integrator role (the one role left that may INSERT into merkle_nodes) plants a
    node that makes the stored size look extended: the integrator signs the root of the
    events it linked anyway, says the stored tree is wrong, and verify passes."""
    begin(pg_url, events=4)
    fake = hashlib.sha256(b"attacker's subtree").digest()
    dsn = role(postgres_server, pg_url, "plant_integrator", integrator=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        planted = [(2, 0), (0, 3)] if where == "inside" else [(0, 10_000)]
        for level, index in planted:
            conn.execute(
                "INSERT INTO merkle_nodes (level, node_index, hash) VALUES (%s, %s, %s)",
                (level, index, fake),
            )
    with AuditStore.open(pg_url, log_format=2) as store:
        done = integrator(store).run(0.05, threading.Event(), once=True)
    assert done.checkpoint == 4
    assert latest_checkpoint(pg_url) == (4, true_root(pg_url, 4))
    assert any("stored Merkle tree" in w for w in done.warnings), done.warnings
    assert verify(pg_url).ok


def test_verify_recomputes_every_checkpoint_root(pg_url: str) -> None:
    """A checkpoint with the right size and link but a wrong root, signed by the integrator
    key (as a fooled integrator would sign it), is a defect."""
    begin(pg_url, events=3)
    with AuditStore.open(pg_url, log_format=2) as store:
        integrator(store, checkpoint_every_s=1e9).step()  # links 1..3, no checkpoint
        store_id = store.store_id
        with store._backend.reader.connect() as conn:
            head = conn.exec_driver_sql("SELECT hash FROM chain WHERE seq = 2").scalar_one()
    wrong = b"\0" * 32
    signed = cp.sign(
        store_id, 2, head, datetime.now(UTC), bytes.fromhex(INTEGRATOR_KEY), root=wrong
    )
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO chain_checkpoints VALUES (2, %s, %s, now(), %s)",
            (wrong.hex(), head, cp.dumps(signed)),
        )
    report = verify(pg_url)
    assert (2, DefectKind.CHECKPOINT) in kinds(report), report.defects
    assert any("Merkle root" in d.detail for d in report.defects)


# -- 2, 3. the integrator key signs voids and checkpoints only ----------------------------------


def forge(
    conn: psycopg.Connection,
    signer: Signer,
    kind: str,
    rid: str,
    data: bytes,
    request_hash: str | None = None,
) -> int:
    """A well-formed format-2 event of ``kind`` at a seq the attacker reserves, signed by
    ``signer``; its seq."""
    request_hash = request_hash or REQUEST_HASH
    seq = conn.execute("SELECT nextval('events_seq')").fetchone()[0]  # type: ignore[index]
    store_id = conn.execute("SELECT value FROM audit_meta WHERE key = 'store_id'").fetchone()[0]  # type: ignore[index]
    row = void_row(seq, signer, "unused", canonical_bytes("fsync"), store_id=store_id)
    body = row["body"].replace(b'"kind":"void"', f'"kind":"{kind}"'.encode())
    body = body.replace(b'"request_hash":null', f'"request_hash":"{request_hash}"'.encode())
    body = body.replace(
        f'"request_id":"{row["request_id"]}"'.encode(), f'"request_id":"{rid}"'.encode()
    )
    body = body.replace(b'{"reason":"unused"}', data)
    own = "sha256:" + hashlib.sha256(body).hexdigest()
    conn.execute(
        "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, request_hash, body, "
        "prev_hash, hash, signature, key_id) VALUES (%s, %s, %s, %s, %s, %s, %s, '', %s, %s, %s)",
        (
            seq, row["event_id"], rid, kind, row["recorded_at"], request_hash, body, own,
            signer.sign(own, sequenced=True, store_id=store_id), signer.key_id,
        ),
    )  # fmt: skip
    return int(seq)


REQUEST_HASH = "sha256:" + "12" * 32


def test_an_answer_signed_by_the_integrator_key_is_never_served_and_fails_verify(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    """The app role plants a REQUEST and its RESPONSE signed with the integrator's key (which
    the operator trusts, even listed among the record keys as the docs once said)."""
    begin(pg_url)
    with psycopg.connect(role(postgres_server, pg_url, "forge_app"), autocommit=True) as conn:
        request = forge(conn, INTEGRATOR, "request", "req-1", b"{}")
        response = forge(conn, INTEGRATOR, "response", "req-1", b'{"answer":"forged","ok":true}')
    integrate(pg_url)
    settings = Settings(
        database_url=pg_url,
        record_key=WRITER_KEY,
        trusted_keys=(INTEGRATOR.public_key,),
        integrator_public_keys=(INTEGRATOR.public_key,),
    )
    with AuditStore.open(pg_url, signer=WRITER) as store:
        found = store.find_response(REQUEST_HASH)
        assert found is not None and found.seq == response
        keys = trusted_record_keys(settings, WRITER)
        problems = check_outcome(store, found, signature=signature_check(keys, store.store_id))
    assert any("not a trusted key" in p for p in problems), problems
    with Auditing.open(settings) as auditing:
        report = auditing.verify()
    assert {(request, DefectKind.UNTRUSTED_SIGNER), (response, DefectKind.UNTRUSTED_SIGNER)} <= (
        kinds(report)
    ), report.defects
    assert any("integrator key" in d.detail for d in report.defects)


def test_a_checkpoint_signed_by_a_record_key_fails_verify(pg_url: str) -> None:
    begin(pg_url, events=3)
    with AuditStore.open(pg_url, log_format=2) as store:
        integrator(store, checkpoint_every_s=1e9).step()
        store_id = store.store_id
        with store._backend.reader.connect() as conn:
            head = conn.exec_driver_sql("SELECT hash FROM chain WHERE seq = 3").scalar_one()
    root = true_root(pg_url, 3)  # even the right root: a record key may not sign it
    signed = cp.sign(store_id, 3, head, datetime.now(UTC), bytes.fromhex(WRITER_KEY), root=root)
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO chain_checkpoints VALUES (3, %s, %s, now(), %s)",
            (root.hex(), head, cp.dumps(signed)),
        )
    report = verify(pg_url)
    assert [(d.seq, d.kind) for d in report.defects] == [(3, DefectKind.CHECKPOINT)]
    assert "record key" in report.defects[0].detail


# -- 4. integration stopped for good, silently ---------------------------------------------------


def test_a_chain_row_planted_far_ahead_blocks_the_integrator_loudly_and_fails_verify(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    begin(pg_url)
    with psycopg.connect(role(postgres_server, pg_url, "far_int", integrator=True)) as conn:
        conn.execute("INSERT INTO chain VALUES (1000000, 'x', 'y')")
        conn.commit()
    with AuditStore.open(pg_url, signer=WRITER) as store:
        for n in range(5):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}"))
    with AuditStore.open(pg_url, log_format=2) as store, pytest.raises(IntegrationBlocked) as why:
        integrator(store).run(0.05, threading.Event(), once=True)
    assert "seq 1000000" in why.value.message and "above the linked prefix" in why.value.message
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": pg_url,
        "GATEWAY_AUDIT_FORMAT": "2",
        "GATEWAY_INTEGRATOR_KEY": INTEGRATOR_KEY,
    }
    command = [str(GATEWAY), "audit", "integrate", "--once"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "seq 1000000" in done.stderr and "gateway audit verify" in done.stderr, done.stderr
    with AuditStore.open(pg_url) as store:
        report = verify_log(store, trust=trust(), stalled_after_s=1e-3)
    found = kinds(report)
    assert (1000000, DefectKind.OUTSIDE_CHAIN) in found, report.defects
    assert (1, DefectKind.STALLED) in found
    assert report.pending_integration == 5


def test_a_wrong_link_stops_the_integrator_loudly_not_silently(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    begin(pg_url, events=4)
    with AuditStore.open(pg_url, log_format=2) as store:
        running = integrator(store)
        assert running.step().head == 4  # a running integrator: 1..4 linked
        with AuditStore.open(pg_url, signer=WRITER) as writer:
            writer.append(EventDraft(kind=EventKind.REQUEST, request_id="r5"))
        with psycopg.connect(role(postgres_server, pg_url, "wrong_int", integrator=True)) as conn:
            prev = conn.execute("SELECT hash FROM chain WHERE seq = 4").fetchone()[0]  # type: ignore[index]
            conn.execute("INSERT INTO chain VALUES (5, %s, %s)", (prev, "sha256:" + "ab" * 32))
            conn.commit()
        with pytest.raises(IntegrationBlocked) as why:
            running.step()
        assert "seq 5" in why.value.message
        with pytest.raises(IntegrationBlocked) as why:
            integrator(store).step()  # a new one, after a restart
        assert "seq 5" in why.value.message
    assert (5, DefectKind.HASH_MISMATCH) in kinds(verify(pg_url))


def test_a_pending_tail_older_than_the_threshold_is_a_stalled_finding(pg_url: str) -> None:
    begin(pg_url, events=2)  # no integrator runs
    with AuditStore.open(pg_url) as store:
        assert verify_log(store, trust=trust()).ok  # just written: inside the default 10 minutes
        stalled = verify_log(store, trust=trust(), stalled_after_s=1e-3)
    assert [(d.seq, d.kind) for d in stalled.defects] == [(1, DefectKind.STALLED)]
    assert "2 event(s) pending integration" in stalled.defects[0].detail


# -- 5. who may begin format 2, and the reviewer's own records under it -------------------------


def test_only_the_owner_or_the_app_role_can_begin_format_2(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    upgrade(pg_url)
    with AuditStore.open(pg_url, signer=WRITER) as gateway:  # a running format-1 gateway
        gateway.append(EventDraft(kind=EventKind.REQUEST, request_id="before"))
        for name, kind in (("begin_reviewer", "read_only"), ("begin_integrator", "integrator")):
            dsn = role(postgres_server, pg_url, name, **{kind: True})
            with (
                psycopg.connect(dsn, autocommit=True) as conn,
                pytest.raises(
                    psycopg.errors.InsufficientPrivilege, match="owner or the application role"
                ),
            ):
                conn.execute("SELECT audit_begin_sequenced()")
        gateway.append(EventDraft(kind=EventKind.REQUEST, request_id="still format 1"))
    app = role(postgres_server, pg_url, "begin_app")
    with psycopg.connect(app, autocommit=True) as conn:
        assert conn.execute("SELECT audit_begin_sequenced()").fetchone() == (3,)


def test_a_reviewer_records_its_own_reads_under_format_2_and_nothing_else(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    begin(pg_url, events=1)
    role(postgres_server, pg_url, "seq_reviewer", read_only=True)
    reviewer = postgres_server.url(pg_url.rsplit("/", 1)[1], "seq_reviewer")
    with AuditStore.open(reviewer, signer=WRITER) as store:
        recorded = store.append(EventDraft(kind=EventKind.EXPORT, request_id="export-1"))
        with pytest.raises(AuditStoreError):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id="not a reviewer's"))
    integrate(pg_url)
    assert recorded.seq == 2
    report = verify(pg_url)
    assert report.ok, report.defects


# -- 8. `audit checkpoint` on a format-2 log -----------------------------------------------------


def test_audit_checkpoint_is_refused_on_a_format_2_log_in_one_line(
    pg_url: str, tmp_path: Path
) -> None:
    begin(pg_url, events=2)
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": pg_url,
        "GATEWAY_CHECKPOINT_KEY": "77" * 32,
        "GATEWAY_RECORD_KEY": WRITER_KEY,
    }
    out = tmp_path / "head.json"
    done = subprocess.run(
        [str(GATEWAY), "audit", "checkpoint", "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and not out.exists()
    assert "Traceback" not in done.stderr
    assert "format 2" in done.stderr and "gateway audit integrate" in done.stderr, done.stderr
    with AuditStore.open(pg_url) as store, store._backend.reader.connect() as conn:
        kinds_written = conn.exec_driver_sql("SELECT kind FROM events ORDER BY seq").scalars()
        assert list(kinds_written) == ["request", "request"]  # no CHECKPOINT event either


# -- 7. seqs reserved in bulk by the app role -----------------------------------------------------


def test_seqs_reserved_in_bulk_are_voided_a_page_a_pass_and_reported(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    begin(pg_url)
    reserved = RESERVED_AHEAD_WARN + 50
    with psycopg.connect(role(postgres_server, pg_url, "bulk_app"), autocommit=True) as conn:
        conn.execute(f"SELECT nextval('events_seq') FROM generate_series(1, {reserved})")
    with AuditStore.open(pg_url, log_format=2) as store:
        running = integrator(store, grace_s=0.1)
        first = running.step()
        assert (first.waiting_on, first.voided) == (1, 0)
        assert any(f"{reserved} seqs are reserved" in w for w in first.warnings), first.warnings
        time.sleep(0.2)
        voided = running.step()
        assert voided.voided == VOID_PAGE  # one page, not all of them at once
        assert running.step().linked == VOID_PAGE
        again = running.step()  # the next page at once: those seqs waited out the grace too
        assert (again.voided, again.waiting_on) == (VOID_PAGE, None)


# -- 10. a format-2 signature names its log ------------------------------------------------------


def test_a_row_signed_for_another_log_does_not_verify_here(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    """Two logs trust the same record key (two deployments of one bank). A format-2 row has
    no prev_hash to bind it to its log, so its signature names the log's store id: copied
    into the other log at the same seq, it is refused by verify and by the read path."""
    other = postgres_server.url(postgres_server.create_database())
    for url in (pg_url, other):
        upgrade(url)
        AuditStore.open(url, log_format=2).close()
    common = {"request_id": "r", "request_hash": REQUEST_HASH}
    with AuditStore.open(other, signer=WRITER) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, data={}, **common))
        store.append(EventDraft(kind=EventKind.RESPONSE, data={"ok": True}, **common))
        with store._backend.reader.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT seq, event_id, request_id, kind, recorded_at, request_hash, body, hash, "
                "signature, key_id FROM events ORDER BY seq"
            ).all()
    with psycopg.connect(role(postgres_server, pg_url, "replay_app"), autocommit=True) as conn:
        conn.execute("SELECT nextval('events_seq') FROM generate_series(1, 2)")
        for row in rows:
            conn.execute(
                "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, request_hash,"
                " body, prev_hash, hash, signature, key_id) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, '', %s, %s, %s)",
                tuple(row),
            )
    with AuditStore.open(pg_url, signer=WRITER) as store:
        found = store.find_response(REQUEST_HASH)
        assert found is not None
        keys = TrustedKeys.of([WRITER.public_key])
        problems = check_outcome(store, found, signature=signature_check(keys, store.store_id))
    assert any("does not check out" in p for p in problems), problems
    report = verify(pg_url)
    assert {(1, DefectKind.BAD_SIGNATURE), (2, DefectKind.BAD_SIGNATURE)} <= kinds(report)
