"""The stored Merkle tree: the same proofs as the streamed computation, O(log n) reads, and a
tampered stored node caught before anything is signed.

The large logs are written straight into a migrated SQLite file (rows of ``seq`` and a
random ``hash``; the tree reads nothing else), so a 65,000-leaf tree costs a second.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from audit import AuditStore, EventDraft, EventKind
from audit.proofs.merkle import (
    ProofError,
    consistency_path,
    event_leaf,
    inclusion_path,
    scan,
    tree_head,
    verify_inclusion,
)
from audit.proofs.merkle_store import MerkleState, MerkleStateError, complete_parts
from audit.proofs.receipt_checks import check_receipt
from audit.proofs.receipts import (
    LEAF_PAGE,
    ReceiptError,
    dumps,
    log_leaves,
    make_receipt,
    rebuild_tree,
    signed_head,
    tree_hashes,
)
from tests.audit.conftest import RECORD, Raw, fill

KEY = bytes.fromhex("11" * 32)


def _event_hash(seq: int) -> str:
    return "sha256:" + hashlib.sha256(f"event {seq}".encode()).hexdigest()


def synthetic_log(path: Path, events: int) -> str:
    """A migrated SQLite audit file whose events table holds ``events`` rows."""
    url = f"sqlite:///{path}"
    AuditStore.open(url).close()
    conn = sqlite3.connect(path)
    conn.executemany(
        "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, prev_hash, hash)"
        " VALUES (?, ?, 'r', 'request', '2026-12-01 00:00:00', x'7b7d', 'p', ?)",
        ((seq, f"e{seq}", _event_hash(seq)) for seq in range(1, events + 1)),
    )
    conn.commit()
    conn.close()
    return url


def leaves(events: int) -> list[bytes]:
    return [event_leaf(_event_hash(seq)) for seq in range(1, events + 1)]


N = 300


@pytest.fixture(scope="module")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditStore]:
    url = synthetic_log(tmp_path_factory.mktemp("merkle") / "audit.db", N)
    with AuditStore.open(url) as store:
        yield store


def test_complete_parts_fold_to_rfc_subtrees() -> None:
    assert complete_parts(0, 7) == [(2, 0), (1, 2), (0, 6)]
    assert complete_parts(8, 13) == [(2, 2), (0, 12)]
    with pytest.raises(ValueError, match="not a subtree"):
        complete_parts(1, 4)  # [1, 2) then [2, 4): not a node of any RFC 6962 tree


@pytest.mark.slow  # builds the stored tree of a 300-event log 60 times: the audit tests' longest
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_proofs_from_the_stored_tree_equal_the_streamed_ones(
    small_log: AuditStore, data: st.DataObject
) -> None:
    state = MerkleState(small_log._backend)
    size = data.draw(st.integers(1, N), label="size")
    page = data.draw(st.integers(1, 40), label="page")
    if data.draw(st.booleans(), label="from scratch"):
        state.rebuild(size, page)
    else:
        state.extend(size, page)
    index = data.draw(st.integers(0, size - 1), label="leaf")
    old = data.draw(st.integers(0, size), label="old size")
    wanted = [*inclusion_path(index, size), *consistency_path(old, size)]
    streamed = scan(leaves(N), size, wanted, roots_at=(old, size))
    stored = state.subtrees(wanted, size)
    assert stored == dict(streamed.hashes)
    assert state.root(size) == streamed.roots[size] == tree_head(leaves(size)).root
    assert state.root(old) == streamed.roots[old]


def test_a_log_with_a_gap_cannot_be_extended(tmp_path: Path) -> None:
    url = synthetic_log(tmp_path / "audit.db", 10)
    raw = Raw(url)
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq = 6")
    raw.close()
    with AuditStore.open(url) as store:
        state = MerkleState(store._backend)
        with pytest.raises(MerkleStateError, match="seq 6 is missing"):
            state.extend(10, page=5)
        assert state.stored_size() == 5  # the whole pages before the gap are kept


class Statements:
    """Every statement the store's engines send, with its bound parameters."""

    def __init__(self, store: AuditStore) -> None:
        self.seen: list[tuple[str, Any]] = []
        self._engines = {store._backend.reader, store._backend.writer}
        for engine in self._engines:
            event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        self.seen.append((statement, params))

    def close(self) -> None:
        for engine in self._engines:
            event.remove(engine, "before_cursor_execute", self._record)

    def __enter__(self) -> Statements:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def queries(self) -> list[str]:
        return [s for s, _ in self.seen if not s.startswith("BEGIN")]

    def recorded(self) -> list[tuple[str, Any]]:
        return [(s, p) for s, p in self.seen if not s.startswith("BEGIN")]

    def reading_events(self) -> int:
        return sum("FROM events" in s for s, _ in self.seen)

    def values_bound(self) -> int:
        return sum(len(p) if isinstance(p, (tuple, list, dict)) else 1 for _, p in self.seen)


def query_plan(url: str, statement: str, params: Any) -> list[str]:
    """SQLite's plan for a statement as the store sent it: SEARCH (a key) or SCAN (a table)."""
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
    finally:
        conn.close()
    return [str(row[-1]) for row in rows]


@pytest.mark.parametrize("events", [1_000, pytest.param(65_537, marks=pytest.mark.slow)])
def test_a_proof_from_the_stored_tree_costs_log_n_reads(tmp_path: Path, events: int) -> None:
    url = synthetic_log(tmp_path / "audit.db", events)
    with AuditStore.open(url) as store:
        MerkleState(store._backend).extend(events)  # caught up once; every proof after it:
        counter = Statements(store)
        try:
            index = events // 3
            path = inclusion_path(index, events)
            found = tree_hashes(store, events, path, roots_at=(events,))
        finally:
            counter.close()
        proof = [found.hashes[r] for r in path]
        verify_inclusion(leaves(events)[index], index, events, proof, found.roots[events])
        # the stored size, then one primary-key lookup of the O(log n) nodes needed
        assert counter.reading_events() == 0
        assert len(counter.queries()) == 2, counter.seen
        assert counter.values_bound() <= 4 * events.bit_length() + 4
        # and SQLite answers each by seeking the key, never by scanning a table
        plans = [plan for query in counter.recorded() for plan in query_plan(url, *query)]
        assert plans and not [p for p in plans if p.startswith("SCAN") and "CONSTANT" not in p]

        streamed = Statements(store)  # the streamed computation reads every leaf, in pages
        try:
            scan(log_leaves(store, events), events, path)
        finally:
            streamed.close()
        assert streamed.reading_events() == -(-events // LEAF_PAGE)


# -- a stored node someone altered -------------------------------------------------------------


def test_a_tampered_stored_node_fails_against_the_signed_root_and_no_receipt_is_signed(
    store: AuditStore, raw: Raw
) -> None:
    fill(store, requests=6)  # 12 events
    head = signed_head(store, KEY)  # the stored tree is now filled up to 12 leaves
    assert head.head == tree_head([event_leaf(e.hash) for e in store.iter_events()])
    # req-4 is seq 9 and 10; the proof of seq 9 (leaf 8) starts with leaf 9, then [10, 12)
    raw.execute(
        "UPDATE merkle_nodes SET hash = ? WHERE level = 0 AND node_index = 9", (b"\x07" * 32,)
    )
    path = inclusion_path(8, 12)
    forged = [tree_hashes(store, 12, path).hashes[r] for r in path]
    leaf = event_leaf(store.event(9).hash)
    with pytest.raises(ProofError, match="another root"):
        verify_inclusion(leaf, 8, 12, forged, head.head.root)
    with pytest.raises(ReceiptError, match="stored node was altered") as refused:
        make_receipt(store, "req-4", KEY)
    assert "tree-head --rebuild" in (refused.value.hint or "")
    assert make_receipt(store, "req-1", KEY)  # proofs that do not pass the node still check

    assert rebuild_tree(store) == 12  # as the owner: recomputed from the log
    receipt = make_receipt(store, "req-4", KEY)
    assert receipt.checkpoint.head == head.head
    assert check_receipt(dumps(receipt), [head.public_key]).ok


def test_a_node_planted_ahead_of_its_leaves_is_refused_not_built_on(
    store: AuditStore, raw: Raw
) -> None:
    """INSERT alone suffices to put a row where a future subtree will be: the extension must
    not skip the real node for it (ON CONFLICT) and then fold it into every later root."""
    fill(store, requests=4)  # 8 events
    signed_head(store, KEY)  # stored up to 8 leaves
    raw.execute(  # leaves 8-11, which do not exist yet
        "INSERT INTO merkle_nodes (level, node_index, hash) VALUES (2, 2, ?)", (b"\x07" * 32,)
    )
    for i in range(4):  # 16 events
        store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"later-{i}", task="t"))
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id=f"later-{i}", task="t"))
    with pytest.raises(MerkleStateError, match=r"\(level 2, index 2\) is not the hash computed"):
        signed_head(store, KEY)
    with pytest.raises(MerkleStateError):
        make_receipt(store, "req-1", KEY)  # no receipt over a root built on the planted row


def test_a_missing_stored_node_is_named_with_the_rebuild(store: AuditStore, raw: Raw) -> None:
    fill(store, requests=4)
    signed_head(store, KEY)
    raw.execute("DELETE FROM merkle_nodes WHERE level = 2 AND node_index = 0")  # leaves 0-3
    with pytest.raises(MerkleStateError, match=r"\(level 2, index 0\) is missing"):
        make_receipt(store, "req-2", KEY)  # seq 5 and 6: their proofs name leaves 0-3


@pytest.mark.postgres
def test_the_app_and_reviewer_roles_prove_from_the_log_but_cannot_write_the_stored_tree(
    postgres_server: Any, pg_url: str
) -> None:
    import psycopg

    from audit.store.migrate import upgrade
    from audit.store.roles import grant

    upgrade(pg_url)
    with AuditStore.open(pg_url) as owner:
        fill(owner, requests=3)
    db = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        for role in ("merkle_app", "merkle_reviewer"):
            if (
                conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
                is None
            ):
                conn.execute(f"CREATE ROLE {role} LOGIN")
    grant(pg_url, "merkle_app")
    grant(pg_url, "merkle_reviewer", read_only=True)
    with AuditStore.open(postgres_server.url(db, "merkle_reviewer")) as reviewer:
        # No INSERT on merkle_nodes (a planted node would be taken as stored): the head is
        # computed from the log's hash column instead.
        assert signed_head(reviewer, KEY).tree_size == 6
        assert MerkleState(reviewer._backend).stored_size() == 0
    with AuditStore.open(postgres_server.url(db, "merkle_app")) as app:
        fill(app, requests=1)
        assert make_receipt(app, "req-0", KEY).checkpoint.tree_size == 8
    for role in ("merkle_app", "merkle_reviewer"):
        with psycopg.connect(postgres_server.dsn(db, role), autocommit=True) as conn:
            for sql in (
                "INSERT INTO merkle_nodes (level, node_index, hash) VALUES (0, 99, 'x')",
                "UPDATE merkle_nodes SET hash = 'x'",
                "DELETE FROM merkle_nodes",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)


def test_tree_head_rebuild_recomputes_an_altered_table(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gateway.cli import main

    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, signer=RECORD) as store:
        fill(store, requests=4)
    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_CHECKPOINT_KEY": KEY.hex(),
        "GATEWAY_TRUSTED_KEYS": RECORD.public_key,
    }
    runner = CliRunner()
    assert runner.invoke(main, ["audit", "tree-head"], env=env).exit_code == 0
    raw = Raw(url)
    raw.execute(
        "UPDATE merkle_nodes SET hash = ? WHERE level = 0 AND node_index = 0", (b"\0" * 32,)
    )
    raw.close()
    refused = runner.invoke(main, ["audit", "prove", "req-0"], env=env)
    assert refused.exit_code == 2 and "a stored node was altered" in refused.output
    assert "tree-head --rebuild" in refused.output
    assert runner.invoke(main, ["audit", "tree-head", "--rebuild"], env=env).exit_code == 0
    assert runner.invoke(main, ["audit", "prove", "req-0"], env=env).exit_code == 0


@pytest.mark.postgres
def test_a_role_that_may_not_touch_the_stored_tree_still_proves_from_the_log(
    postgres_server: Any, pg_url: str
) -> None:
    import psycopg

    from audit.store.migrate import upgrade

    upgrade(pg_url)
    with AuditStore.open(pg_url) as owner:
        fill(owner, requests=3)
        expected = signed_head(owner, KEY)
    db = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.dsn(db), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'old_reader'").fetchone() is None:
            conn.execute("CREATE ROLE old_reader LOGIN")
        # granted before migration 0009: the old tables only
        conn.execute("GRANT SELECT ON events, payloads, policies, audit_meta, alembic_version "
                     "TO old_reader")  # fmt: skip
    with AuditStore.open(postgres_server.url(db, "old_reader")) as reader:
        with Statements(reader) as counter:
            head = signed_head(reader, KEY)
        assert head.head == expected.head
        assert counter.reading_events() >= 1  # streamed from the hash column
        receipt = make_receipt(reader, "req-1", KEY)
        assert check_receipt(dumps(receipt), [receipt.checkpoint.public_key]).ok


def test_extenders_racing_on_one_database_store_one_tree(store: AuditStore) -> None:
    import threading

    fill(store, requests=40)  # 80 events
    size = store.head()[0]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def extend() -> None:
        try:
            barrier.wait()
            MerkleState(store._backend).extend(size, page=7)  # many small pages: overlaps
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=extend) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    leaves = [event_leaf(e.hash) for e in store.iter_events()]
    assert MerkleState(store._backend).root(size) == tree_head(leaves).root
