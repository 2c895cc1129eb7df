"""`gateway audit checkpoint` and `verify --checkpoint FILE` of a format-2 head.

The auditor keeps the file outside the database; a later verify proves the log still holds
and extends it. Real PostgreSQL; the commands run as real processes, the tampers as the
tables' owner with the triggers off (Raw.unguard), as a database administrator could. The
integrator runs in-process (tests/audit/test_sequenced_security.py's helpers).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import digest
from audit.errors import CheckpointError
from audit.proofs import checkpoint as cp
from audit.sequenced import integrated_checkpoint
from audit.store.migrate import upgrade
from audit.store.models import Checkpoint, DefectKind, VerifyReport
from audit.store.sequenced import chain_link
from audit.verify import verify_log
from tests.audit.conftest import Raw
from tests.audit.test_sequenced_security import (
    GATEWAY,
    INTEGRATOR,
    WRITER,
    WRITER_KEY,
    begin,
    integrate,
    kinds,
    role,
    true_root,
    trust,
    verify,
)
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

CHECKPOINT_KEY = "77" * 32


def pairs(url: str, names: list[str]) -> None:
    """A REQUEST and its RESPONSE for each name."""
    with AuditStore.open(url, signer=WRITER) as store:
        for name in names:
            common = {"request_id": name, "request_hash": digest(name.encode())}
            store.append(EventDraft(kind=EventKind.REQUEST, data={}, **common))
            store.append(EventDraft(kind=EventKind.RESPONSE, data={"ok": True}, **common))


def gateway(url: str, *args: str, integrator: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY,
        "GATEWAY_RECORD_KEY": WRITER_KEY,
        "GATEWAY_INTEGRATOR_PUBLIC_KEYS": INTEGRATOR.public_key if integrator else "",
    }
    return subprocess.run(
        [str(GATEWAY), *args], env=env, capture_output=True, text=True, timeout=120
    )


def checkpoint(url: str) -> Checkpoint:
    """What `gateway audit checkpoint` makes (in-process, for the tamper tests)."""
    with AuditStore.open(url, signer=WRITER) as store:
        return integrated_checkpoint(store, bytes.fromhex(CHECKPOINT_KEY), [INTEGRATOR.public_key])


def verify_against(url: str, head: Checkpoint, jobs: int = 1) -> VerifyReport:
    with AuditStore.open(url) as store:
        return verify_log(store, checkpoint=head, trust=trust(), jobs=jobs)


@pytest.fixture
def log(pg_url: str) -> str:
    """A format-2 log of three requests (seqs 1-6), linked and checkpointed at 6."""
    begin(pg_url)
    pairs(pg_url, ["r0", "r1", "r2"])
    integrate(pg_url)
    return pg_url


@pytest.fixture
def owner(log: str) -> Iterator[Raw]:
    raw = Raw(log)
    raw.unguard()
    yield raw
    raw.close()


def test_a_format_2_checkpoint_is_the_integrators_head_and_later_events_extend_it(
    log: str, tmp_path: Path
) -> None:
    head_file = tmp_path / "head.json"
    made = gateway(log, "audit", "checkpoint", "-o", str(head_file))
    assert made.returncode == 0, made.stderr
    assert made.stderr.count("\n") == 1 and "checkpoint at seq 6" in made.stderr
    head = cp.loads(
        head_file.read_text(), trusted_public_key=cp.public_key(bytes.fromhex(CHECKPOINT_KEY))
    )
    with AuditStore.open(log) as store, store._backend.reader.connect() as conn:
        link = conn.exec_driver_sql("SELECT hash FROM chain WHERE seq = 6").scalar_one()
        recorded = store.event(7)
    # The link the integrator made at its checkpoint's size, not an event's own hash, and
    # the root of events 1..6; the reviewer's read is recorded (pending: the next covers it).
    assert (head.seq, head.tree_size, head.hash) == (6, 6, link)
    assert head.root == cp.b64(true_root(log, 6))
    assert recorded.kind == EventKind.CHECKPOINT
    assert recorded.data["integrator_checkpoint"] == 6
    pairs(log, ["r3", "r4"])
    integrate(log)
    checked = gateway(log, "audit", "verify", "--checkpoint", str(head_file), "--format", "json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["ok"] and report["checkpoint_seq"] == 6 and report["tree_root_checked"]
    assert report["head_seq"] == 11 and report["checkpoint_pinned"] is True
    text = gateway(log, "audit", "verify", "--checkpoint", str(head_file))
    assert text.returncode == 0 and "extends checkpoint seq 6" in text.stdout, text.stdout


def test_a_truncated_log_is_refused_though_the_chain_alone_cannot_see_it(
    log: str, owner: Raw
) -> None:
    head = checkpoint(log)
    pairs(log, ["r3"])
    integrate(log)
    # The owner cuts the log back to seq 4, with its links and the integrator's checkpoints.
    for table, column in [("events", "seq"), ("chain", "seq"), ("chain_checkpoints", "size")]:
        owner.execute(f"DELETE FROM {table} WHERE {column} >= 5")
    assert verify(log).ok, verify(log).defects
    report = verify_against(log, head)
    assert (5, DefectKind.CHECKPOINT) in kinds(report), report.defects
    assert any("truncation" in d.detail for d in report.defects)


def rewrite(owner: Raw, url: str, seq: int, *, relink: bool) -> None:
    """The owner rewrites a RESPONSE (``ok`` true to false), with a valid record signature
    (an operator holds the record key). ``relink``: every link from it on recomputed, the
    integrator's checkpoints from it on removed, and the integrator run again to sign the
    rewritten head (it holds that key too): a self-consistent history, as the chain sees it."""
    body = owner.body(seq)
    changed = body.replace(b'"ok":true', b'"ok":false')
    assert changed != body
    new_hash = digest(changed)
    with AuditStore.open(url) as store:
        signature = WRITER.sign(new_hash, sequenced=True, store_id=store.store_id)
    owner.execute(
        "UPDATE events SET body = ?, hash = ?, signature = ? WHERE seq = ?",
        (changed, new_hash, signature, seq),
    )
    if not relink:
        return
    rows = owner.execute("SELECT seq, prev_hash FROM chain WHERE seq >= ? ORDER BY seq", (seq,))
    prev = rows[0][1]
    for at, _ in rows:
        (event_hash,) = owner.execute("SELECT hash FROM events WHERE seq = ?", (at,))[0]
        link = chain_link(prev, event_hash)
        owner.execute("UPDATE chain SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, link, at))
        prev = link
    owner.execute("DELETE FROM chain_checkpoints WHERE size >= ?", (seq,))
    integrate(url)


@pytest.mark.parametrize(
    ("seq", "relink", "says"),
    [
        pytest.param(6, True, "rewritten or forked", id="at-the-checkpoint"),
        pytest.param(4, True, "rewritten or forked", id="below-it"),
        pytest.param(4, False, "Merkle root of events 1..6", id="below-it-links-left"),
    ],
)
def test_a_rewritten_event_at_or_below_the_checkpoint_is_refused(
    log: str, owner: Raw, seq: int, relink: bool, says: str
) -> None:
    head = checkpoint(log)
    pairs(log, ["r3"])
    integrate(log)
    rewrite(owner, log, seq, relink=relink)
    if relink:  # nothing but the auditor's file can tell
        assert verify(log).ok, verify(log).defects
    report = verify_against(log, head)
    found = [d for d in report.defects if d.kind == DefectKind.CHECKPOINT and d.seq == 6]
    assert found and says in found[0].detail, report.defects


def _copy_database(server: PostgresServer, url: str) -> str:
    """A copy of the log's database (same store id): the two then diverge."""
    source = url.rsplit("/", 1)[1]
    copy = source + "_fork"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (source,),
        )
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{source}"')
    return server.url(copy)


def test_a_checkpoint_of_a_log_that_forked_from_this_one_is_refused(
    log: str, postgres_server: PostgresServer
) -> None:
    fork = _copy_database(postgres_server, log)
    pairs(fork, ["other-3", "other-4"])
    integrate(fork)
    theirs = checkpoint(fork)  # 6 + 4 events, checkpointed at 10
    pairs(log, ["r3", "r4", "r5"])
    integrate(log)
    ours = checkpoint(log)
    with AuditStore.open(log) as a, AuditStore.open(fork) as b:
        assert a.store_id == b.store_id  # a copy: check_checkpoint cannot tell them apart
    assert theirs.seq == 10 and ours.seq == 12
    assert verify_against(log, ours).ok
    report = verify_against(log, theirs)
    assert (10, DefectKind.CHECKPOINT) in kinds(report), report.defects
    assert "rewritten or forked" in report.defects[0].detail
    # And the other way round: the fork is shorter than our head, so it ends before it.
    back = verify_against(fork, ours)
    assert any(d.kind == DefectKind.CHECKPOINT for d in back.defects), back.defects


def test_a_format_1_era_checkpoint_still_verifies_after_the_switch(
    pg_url: str, tmp_path: Path
) -> None:
    upgrade(pg_url)
    pairs(pg_url, ["old-0", "old-1"])
    head_file = tmp_path / "format-1.json"
    made = gateway(pg_url, "audit", "checkpoint", "-o", str(head_file))
    assert made.returncode == 0, made.stderr
    AuditStore.open(pg_url, log_format=2).close()  # format 2 from seq 6
    pairs(pg_url, ["new-0", "new-1"])
    integrate(pg_url)
    done = gateway(pg_url, "audit", "verify", "--checkpoint", str(head_file), "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["checkpoint_seq"] == 5 and report["sequenced_from"] == 6
    assert report["tree_root_checked"] and report["head_seq"] == 9
    # Its seq is a format-1 event's: the format-1 walk checks it, and still finds a rewrite.
    raw = Raw(pg_url)
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq >= 5")
    raw.execute("DELETE FROM chain")
    raw.execute("DELETE FROM chain_checkpoints")
    raw.close()
    cut = gateway(pg_url, "audit", "verify", "--checkpoint", str(head_file))
    assert cut.returncode == 1 and "truncation or rollback" in cut.stdout, cut.stdout


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_format_2_checkpoint_of_a_log_begun_in_format_1(pg_url: str, jobs: int) -> None:
    """The format-2 head's link starts from the last format-1 event's hash and its root
    covers both eras; with --jobs 2 the format-1 part is walked by worker processes (a log
    born in format 2 has no format-1 part to share out) and the file still reaches the
    format-2 walk."""
    upgrade(pg_url)
    pairs(pg_url, ["old-0", "old-1"])
    AuditStore.open(pg_url, log_format=2).close()  # format 2 from seq 5
    pairs(pg_url, ["new-0"])
    integrate(pg_url)
    head = checkpoint(pg_url)
    assert head.seq == 6 and head.root == cp.b64(true_root(pg_url, 6))
    pairs(pg_url, ["new-1"])
    integrate(pg_url)
    report = verify_against(pg_url, head, jobs)
    assert report.ok and report.checkpoint_seq == 6 and report.tree_root_checked, report.defects
    raw = Raw(pg_url)
    raw.unguard()
    raw.execute("UPDATE events SET hash = ? WHERE seq = 3", (digest(b"another event"),))
    raw.close()
    report = verify_against(pg_url, head, jobs)  # a format-1 leaf under a format-2 head
    # The file's own defect, not only the integrator checkpoint's at the same seq.
    mine = "the Merkle root of events 1..6 is not the checkpoint's"
    assert any(d.seq == 6 and mine in d.detail for d in report.defects), report.defects


def test_a_reviewer_can_checkpoint_a_format_2_log(
    log: str, postgres_server: PostgresServer
) -> None:
    role(postgres_server, log, "cp_reviewer", read_only=True)
    reviewer = postgres_server.url(log.rsplit("/", 1)[1], "cp_reviewer")
    with AuditStore.open(reviewer, signer=WRITER) as store:  # its read recorded, signed
        head = integrated_checkpoint(store, bytes.fromhex(CHECKPOINT_KEY), [INTEGRATOR.public_key])
    assert head.seq == 6 and verify_against(log, head).ok


@pytest.mark.parametrize(
    ("integrated", "keys", "says"),
    [
        pytest.param(True, False, "GATEWAY_INTEGRATOR_PUBLIC_KEYS", id="no-integrator-key"),
        pytest.param(False, True, "gateway audit integrate", id="nothing-signed-yet"),
    ],
)
def test_a_format_2_checkpoint_that_cannot_be_made_is_refused_in_one_line(
    pg_url: str, tmp_path: Path, integrated: bool, keys: bool, says: str
) -> None:
    begin(pg_url)
    pairs(pg_url, ["r0"])
    if integrated:
        integrate(pg_url)
    out = tmp_path / "head.json"
    done = gateway(pg_url, "audit", "checkpoint", "-o", str(out), integrator=keys)
    assert done.returncode == 2 and not out.exists(), done.stderr
    assert "Traceback" not in done.stderr and says in done.stderr, done.stderr
    with AuditStore.open(pg_url) as store, store._backend.reader.connect() as conn:
        written = conn.exec_driver_sql("SELECT kind FROM events ORDER BY seq").scalars()
        assert list(written) == ["request", "response"]  # no CHECKPOINT event


def test_a_checkpoint_file_signed_by_another_key_is_refused(log: str, tmp_path: Path) -> None:
    head = checkpoint(log)
    forged = cp.sign(
        head.store_id,
        head.seq,
        head.hash,
        head.created_at,
        b"\x09" * 32,
        root=base64.b64decode(head.root or ""),
    )
    path = tmp_path / "forged.json"
    path.write_text(cp.dumps(forged))
    done = gateway(log, "audit", "verify", "--checkpoint", str(path))
    assert done.returncode == 2 and "another key" in done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("tamper", "says"),
    [
        pytest.param(
            "UPDATE chain SET hash = 'sha256:' || repeat('0', 64) WHERE seq = 6",
            "names a link the chain does not hold at seq 6",
            id="link-not-in-chain",
        ),
        pytest.param(
            "UPDATE chain_checkpoints SET checkpoint = replace(checkpoint, chain_head, "
            "'sha256:' || repeat('0', 64)) WHERE size = 6",
            "signature does not match its contents",
            id="link-outside-the-note-altered",
        ),
    ],
)
def test_an_integrator_head_whose_link_does_not_check_out_is_not_countersigned(
    log: str, owner: Raw, tamper: str, says: str
) -> None:
    """The note a checkpoint is picked by covers its root, not its link: the link is taken
    only from a row whose JSON signature holds and that the chain holds too."""
    owner.execute(tamper)
    with pytest.raises(CheckpointError, match=says):
        checkpoint(log)
    with AuditStore.open(log) as store:
        assert store.head()[0] == 6  # nothing recorded
