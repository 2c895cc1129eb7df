"""Receipts, tree heads and `audit list` on a format-2 log (real PostgreSQL, real processes).

A receipt is proven against the integrator's own signed checkpoint and checked in a fresh
interpreter that has the integrator's public key and nothing else (no database URL, no
private key); a request the integrator has not covered yet has no receipt, in one line; the
integrator role, which may INSERT into merkle_nodes, plants a subtree that agrees with its
own proofs, and neither `prove` nor `tree-head` signs or hands out its root.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from sqlalchemy import event

from audit import AuditStore, EventDraft, EventFilter, EventKind, list_requests
from audit.proofs.merkle import event_leaf, node_hash, tree_head
from audit.proofs.receipt_checks import check_receipt
from audit.proofs.receipts import ReceiptError, dumps
from audit.sequenced.integrator import Integrator
from audit.sequenced.receipts import IntegrationPending, make_integrated_receipt
from audit.store.chain import link_hash
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.store.signing import Signer
from gateway._vocabulary import request_status
from gateway.cli import main
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

GATEWAY = Path(sys.executable).with_name("gateway")
INTEGRATOR_KEY = "5e" * 32
INTEGRATOR = Signer.from_text(INTEGRATOR_KEY)
WRITER = Signer.from_text("01" * 32)
CHECKPOINT_KEY = "11" * 32
CHECKPOINT = Signer.from_text(CHECKPOINT_KEY)


def begin(url: str, requests: int = 0, events: int = 2) -> None:
    """A format-2 log with ``requests`` requests of ``events`` events each (req-0, ...)."""
    upgrade(url)
    AuditStore.open(url, log_format=2).close()
    append(url, [f"req-{n}" for n in range(requests)], events)


def append(url: str, request_ids: list[str], events: int = 2) -> None:
    with AuditStore.open(url, signer=WRITER) as store:
        for rid in request_ids:
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=rid, task="t"))
            if events > 1:
                store.append(EventDraft(kind=EventKind.RESPONSE, request_id=rid, task="t"))


def integrate(url: str, *, checkpoint: bool = True) -> None:
    every = 0.0 if checkpoint else 1e9
    with AuditStore.open(url, log_format=2) as store:
        integrator = Integrator(
            store, bytes.fromhex(INTEGRATOR_KEY), grace_s=0.2, checkpoint_every_s=every
        )
        if checkpoint:
            integrator.run(0.05, threading.Event(), once=True)
        else:
            integrator.step()  # links what is committed; no checkpoint yet


def true_root(url: str, size: int) -> str:
    with AuditStore.open(url) as store:
        leaves = [event_leaf(e.hash) for e in store.iter_events() if e.seq <= size]
    return base64.b64encode(tree_head(leaves).root).decode()


def gateway(url: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The real `gateway` command against the log, trusting the integrator's public key and
    the writer's record key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env |= {"GATEWAY_DATABASE_URL": url, "GATEWAY_INTEGRATOR_PUBLIC_KEYS": INTEGRATOR.public_key}
    env |= {"GATEWAY_TRUSTED_KEYS": WRITER.public_key}
    env |= extra
    return subprocess.run(
        [str(GATEWAY), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def check_elsewhere(receipt: Path, key: str) -> subprocess.CompletedProcess[str]:
    """`check-receipt` in a fresh interpreter with no GATEWAY_* setting at all (so no
    database URL and no key), in a directory of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    where = receipt.parent / "elsewhere"
    where.mkdir(exist_ok=True)
    args = [sys.executable, "-m", "gateway", "audit", "check-receipt", str(receipt)]
    return subprocess.run(
        [*args, "--public-key", key],
        env=env,
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- a receipt against the integrator's checkpoint ----------------------------------------------


def test_a_format_2_receipt_checks_out_in_a_fresh_process_with_only_the_integrator_key(
    pg_url: str, tmp_path: Path
) -> None:
    begin(pg_url, requests=3)
    integrate(pg_url)
    receipt = tmp_path / "receipt.json"
    made = gateway(pg_url, "audit", "prove", "req-1", "-o", str(receipt))  # no checkpoint key
    assert made.returncode == 0, made.stderr
    cp = json.loads(receipt.read_text())["checkpoint"]
    assert cp["public_key"] == INTEGRATOR.public_key  # the integrator's note, as it signed it
    assert (cp["tree_size"], cp["root"]) == (6, true_root(pg_url, 6))

    checked = check_elsewhere(receipt, INTEGRATOR.public_key)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "receipt checks out: request req-1, events seq 3, 4" in checked.stdout
    assert list((tmp_path / "elsewhere").iterdir()) == []  # no database was opened or made
    for other in (WRITER.public_key, CHECKPOINT.public_key):  # a record key, the checkpoint key
        refused = check_elsewhere(receipt, other)
        assert refused.returncode == 1 and "signed by no trusted key" in refused.stdout


def _flip(text: str, at: int = 3) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def _root(v: dict[str, Any]) -> None:
    cp = v["checkpoint"]
    cp["note"] = cp["note"].replace(cp["root"], _flip(cp["root"]))
    cp["root"] = _flip(cp["root"])


def _path(v: dict[str, Any]) -> None:
    v["events"][0]["inclusion_proof"][0] = _flip(v["events"][0]["inclusion_proof"][0])


def _leaf(v: dict[str, Any]) -> None:  # another body, hashed again: another leaf
    e = v["events"][1]
    e["body"] = e["body"].replace('"task":"t"', '"task":"x"')
    e["hash"] = link_hash(e["prev_hash"], e["body"].encode())


def _signature(v: dict[str, Any]) -> None:
    cp = v["checkpoint"]
    text, line = cp["note"].rsplit("\n\n", 1)
    dash, name, sig = line.rstrip("\n").split(" ")
    cp["note"] = f"{text}\n\n{dash} {name} {_flip(sig, 20)}\n"


def _public_key(v: dict[str, Any]) -> None:
    v["checkpoint"]["public_key"] = WRITER.public_key


TAMPERINGS = {
    "root": (_root, "signature does not match its text"),
    "path": (_path, "inclusion proof is refused"),
    "leaf": (_leaf, "inclusion proof is refused"),
    "note signature": (_signature, "signature does not match its text"),
    "public_key": (_public_key, "is not the key that signed its note"),
}


def test_a_tampered_format_2_receipt_is_refused_with_the_reason(pg_url: str) -> None:
    begin(pg_url, requests=5)
    integrate(pg_url)
    with AuditStore.open(pg_url) as store:
        text = dumps(make_integrated_receipt(store, "req-2", [INTEGRATOR.public_key]))
    # Both keys trusted, so a swapped public_key still opens the note: only the check that
    # public_key is the note's signer refuses it.
    keys = [INTEGRATOR.public_key, WRITER.public_key]
    assert check_receipt(text, keys).ok
    for what, (change, reason) in TAMPERINGS.items():
        value = json.loads(text)
        change(value)
        report = check_receipt(json.dumps(value), keys)
        assert not report.ok, what
        assert any(reason in p for p in report.problems), (what, report.problems)


# -- not yet covered ----------------------------------------------------------------------------


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_request_not_yet_covered_by_an_integrator_checkpoint_has_no_receipt_yet(
    pg_url: str, tmp_path: Path
) -> None:
    begin(pg_url, requests=2)
    integrate(pg_url)
    append(pg_url, ["late"])  # seqs 5 and 6, committed, not linked
    receipt = tmp_path / "receipt.json"
    pending = gateway(pg_url, "audit", "prove", "late", "-o", str(receipt))
    assert pending.returncode == 2
    line = _one_line(pending)
    assert "'late' has event(s) the integrator has not linked yet (seq 5, 6)" in line
    assert "gateway audit integrate" in line
    assert not receipt.exists()

    integrate(pg_url, checkpoint=False)  # linked, but no checkpoint covers them
    unsigned = gateway(pg_url, "audit", "prove", "late")
    assert unsigned.returncode == 2
    line = _one_line(unsigned)
    assert "seq 6 is not yet covered by a signed integrator checkpoint" in line
    assert "covers seqs 1..4" in line and "gateway audit integrate" in line

    keyless = gateway(pg_url, "audit", "prove", "req-0", GATEWAY_INTEGRATOR_PUBLIC_KEYS="")
    assert keyless.returncode == 2 and "GATEWAY_INTEGRATOR_PUBLIC_KEYS" in _one_line(keyless)

    integrate(pg_url)  # nothing left to link: it signs the head no checkpoint covers
    assert gateway(pg_url, "audit", "prove", "late", "-o", str(receipt)).returncode == 0
    assert check_elsewhere(receipt, INTEGRATOR.public_key).returncode == 0
    append(pg_url, ["last"], events=1)
    with AuditStore.open(pg_url) as store, pytest.raises(IntegrationPending):
        make_integrated_receipt(store, "last", [INTEGRATOR.public_key])


# -- the integrator role plants merkle_nodes ----------------------------------------------------


def integrator_role(server: PostgresServer, url: str) -> str:
    """The DSN of a role granted as `gateway db grant ROLE --integrator` grants it."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'planter'").fetchone() is None:
            conn.execute("CREATE ROLE planter LOGIN")
    grant(url, "planter", integrator=True)
    return server.dsn(url.rsplit("/", 1)[1], "planter")


def test_a_subtree_the_integrator_role_plants_gives_no_receipt_and_no_tree_head_of_its_root(
    pg_url: str, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """The planted nodes agree with each other: the proof of seq 5 through them leads to
    the root they make. Signing that root (as prove and tree-head did, from the stored tree)
    would hand out a receipt that checks out offline for a tree that is not the log's."""
    begin(pg_url, requests=4, events=1)  # seqs 1-4
    integrate(pg_url)  # linked, checkpointed, stored tree of 4 leaves
    append(pg_url, ["late-0", "late-1"], events=1)  # seqs 5 and 6
    with AuditStore.open(pg_url) as store:
        leaf5 = event_leaf(store.event(5).hash)
    fake = b"\x07" * 32
    with psycopg.connect(integrator_role(postgres_server, pg_url), autocommit=True) as conn:
        for level, index, value in ((0, 4, leaf5), (0, 5, fake), (1, 2, node_hash(leaf5, fake))):
            conn.execute(
                "INSERT INTO merkle_nodes (level, node_index, hash) VALUES (%s, %s, %s)",
                (level, index, value),
            )
    integrate(pg_url)  # signs the true root of 6 (its own frontier) and warns
    keys = {"GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY}

    receipt = tmp_path / "receipt.json"
    refused = gateway(pg_url, "audit", "prove", "late-0", "-o", str(receipt), **keys)
    assert refused.returncode == 2, refused.stderr
    line = _one_line(refused)
    assert "event seq 5 a proof that does not lead to the signed root" in line
    assert "stored node was altered or planted" in line and "--rebuild" in line
    assert not receipt.exists()

    head = tmp_path / "head.json"
    signed = gateway(pg_url, "audit", "tree-head", "-o", str(head), **keys)
    assert signed.returncode == 0, signed.stderr
    written = json.loads(head.read_text())
    assert (written["tree_size"], written["root"]) == (6, true_root(pg_url, 6))
    assert written["public_key"] == CHECKPOINT.public_key

    # The owner recomputes the table from the log; then the receipt is the true tree's.
    assert gateway(pg_url, "audit", "tree-head", "--rebuild", **keys).returncode == 0
    made = gateway(pg_url, "audit", "prove", "late-0", "-o", str(receipt))
    assert made.returncode == 0, made.stderr
    assert json.loads(receipt.read_text())["checkpoint"]["root"] == true_root(pg_url, 6)
    assert check_elsewhere(receipt, INTEGRATOR.public_key).returncode == 0


def test_a_checkpoint_row_written_without_the_integrator_key_is_passed_over(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    """The integrator role can INSERT into chain_checkpoints but cannot sign as the
    integrator: a row it signed with a key of its own is never what a receipt carries."""
    begin(pg_url, requests=2)
    integrate(pg_url)  # checkpoint of 4
    append(pg_url, ["late"])  # seqs 5, 6
    integrate(pg_url, checkpoint=False)
    from datetime import UTC, datetime

    from audit.proofs import checkpoint as cp

    with AuditStore.open(pg_url) as store, store._backend.reader.connect() as conn:
        link = conn.exec_driver_sql("SELECT hash FROM chain WHERE seq = 6").scalar_one()
        store_id = store.store_id
    with AuditStore.open(pg_url) as store:
        leaves = [event_leaf(e.hash) for e in store.iter_events()]
    forged = cp.sign(
        store_id, 6, link, datetime.now(UTC), bytes.fromhex(CHECKPOINT_KEY),
        root=tree_head(leaves).root,
    )  # fmt: skip
    with psycopg.connect(integrator_role(postgres_server, pg_url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO chain_checkpoints VALUES (6, %s, %s, now(), %s)",
            (tree_head(leaves).root.hex(), link, cp.dumps(forged)),
        )
        conn.execute(  # and one that is not a checkpoint at all
            "INSERT INTO chain_checkpoints VALUES (5, %s, %s, now(), 'garbage')", ("00", link)
        )
    with AuditStore.open(pg_url) as store:
        with pytest.raises(ReceiptError, match="size 6: the checkpoint is signed by no trusted"):
            make_integrated_receipt(store, "late", [INTEGRATOR.public_key])  # only 6 covers 6
        receipt = make_integrated_receipt(store, "req-1", [INTEGRATOR.public_key])
    assert receipt.checkpoint.tree_size == 4  # the integrator's: not 6 (forged) nor 5 (garbage)
    assert receipt.checkpoint.public_key == INTEGRATOR.public_key


# -- audit list marks what is pending -----------------------------------------------------------


def test_audit_list_marks_a_request_pending_integration_in_text_and_json(pg_url: str) -> None:
    begin(pg_url, requests=2)
    integrate(pg_url)
    append(pg_url, ["late"])
    env = {"GATEWAY_DATABASE_URL": pg_url}
    runner = CliRunner()
    text = runner.invoke(main, ["audit", "list"], env=env)
    assert text.exit_code == 0, text.output
    rows = {line.split()[-1]: line for line in text.output.splitlines() if "req-" in line}
    late = next(line for line in text.output.splitlines() if line.rstrip().endswith(" late"))
    assert late.split()[0] == "5-6*"
    assert all("*" not in line.split()[0] for line in rows.values())
    assert "* pending integration: not yet linked by `gateway audit integrate`" in text.output
    as_json = runner.invoke(main, ["audit", "list", "--format", "json"], env=env)
    marks = {r["request_id"]: r["pending_integration"] for r in json.loads(as_json.output)}
    assert marks == {"req-0": False, "req-1": False, "late": True}

    integrate(pg_url)
    after = runner.invoke(main, ["audit", "list"], env=env)
    assert "pending integration" not in after.output and "5-6*" not in after.output


def test_audit_list_asks_about_pending_events_once_a_page_not_once_a_row(pg_url: str) -> None:
    begin(pg_url, requests=999, events=1)
    integrate(pg_url)
    append(pg_url, ["late-0", "late-1"], events=1)  # rows 1,000 and 1,001: two pages
    asked: list[str] = []
    with AuditStore.open(pg_url) as store:
        event.listen(
            store._backend.reader,
            "before_cursor_execute",
            lambda *a: asked.append(a[2]) if "FROM chain" in a[2] else None,
        )
        rows = list_requests(store, EventFilter(), status=request_status, limit=None)
    assert len(rows) == 1_001 and len(asked) == 2
    assert [r.request_id for r in rows if r.pending_integration] == ["late-0", "late-1"]


def test_a_format_2_tree_head_is_the_integrator_checkpoints_and_needs_its_key(
    pg_url: str, tmp_path: Path
) -> None:
    begin(pg_url, requests=2)
    integrate(pg_url)
    append(pg_url, ["late"])  # seqs 5 and 6, pending: no integrator has vouched for them
    keys = {"GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY}
    head = tmp_path / "head.json"
    signed = gateway(pg_url, "audit", "tree-head", "-o", str(head), **keys)
    assert signed.returncode == 0, signed.stderr
    written = json.loads(head.read_text())
    assert (written["tree_size"], written["root"]) == (4, true_root(pg_url, 4))
    keyless = gateway(pg_url, "audit", "tree-head", GATEWAY_INTEGRATOR_PUBLIC_KEYS="", **keys)
    assert keyless.returncode == 2 and "GATEWAY_INTEGRATOR_PUBLIC_KEYS" in _one_line(keyless)
