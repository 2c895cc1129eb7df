"""The log's Merkle tree, stored: complete subtree hashes, so a proof costs O(log n) reads.

    state = MerkleState(store.backend)
    state.extend(size)                     # hash the events not yet in the table, in pages
    hashes = state.subtrees(inclusion_path(4, size), size)     # one query, O(log n) rows
    root = state.root(size)

``merkle_nodes`` (migration 0009) holds node ``(level, i)`` = the RFC 6962 hash of leaves
``[i * 2^level, (i + 1) * 2^level)`` for every *complete* subtree of the leaves stored so far
(level 0 = the leaf hashes, ``H(0x00 || raw event hash)``). Any subtree a proof names, even
one on the tree's ragged right edge, is a fold of at most log2(n) complete ones (the binary
decomposition of its width), so any proof or root needs O(log n) rows, read by primary key.

The table is derived from the log's ``hash`` column and rebuildable (:meth:`rebuild`). It is
extended from the highest stored leaf: the right edge of the stored tree (its complete
subtrees, at most log2(n) rows) plus the new leaves give every new node, one page of events
per transaction so appenders are never held up for long. Two processes extending at once
compute the same rows; the second one's inserts are skipped (ON CONFLICT DO NOTHING), and
any row that was already there is compared with the hash computed from the log (a row planted
ahead of its leaves is refused, not built on).

Nothing here is trusted: a row someone altered makes a proof that does not lead to the root,
and audit.proofs.receipts checks every proof it makes against the root before it signs or hands
anything out. This module only reads and writes rows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy import Connection, delete, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from audit.errors import CheckpointError
from audit.proofs.merkle import EMPTY_ROOT, HASH_SIZE, Range, event_leaf, node_hash
from audit.store.backend import Backend
from audit.store.schema import EVENTS, MERKLE_NODES

PAGE = 20_000  # events hashed per transaction while the table is extended
LOOKUP_CHUNK = 200  # (level, index) pairs per SELECT: well inside SQLite's expression depth

# A complete subtree: (level, index), covering [index << level, (index + 1) << level).
Node = tuple[int, int]


class MerkleStateError(CheckpointError):
    """The stored tree cannot answer: the log has a gap, or rows are missing or malformed."""


def complete_parts(start: int, end: int) -> list[Node]:
    """The complete subtrees whose fold (right to left) is the RFC 6962 hash of leaves
    [start, end): the largest aligned power of two first. :class:`ValueError` if the range
    is not a subtree of some tree (its parts would not shrink strictly, as RFC 9162's splits
    do), which no proof path produces."""
    if not 0 <= start < end:
        raise ValueError(f"[{start}, {end}) is not a range of leaves")
    parts: list[Node] = []
    at = start
    while at < end:
        level = (end - at).bit_length() - 1
        while at & ((1 << level) - 1):
            level -= 1
        if parts and level >= parts[-1][0]:
            raise ValueError(f"[{start}, {end}) is not a subtree of an RFC 6962 tree")
        parts.append((level, at >> level))
        at += 1 << level
    return parts


def _fold(hashes: list[bytes]) -> bytes:
    acc = hashes[-1]
    for left in reversed(hashes[:-1]):
        acc = node_hash(left, acc)
    return acc


class MerkleState:
    """The stored tree of one audit database (its backend's engines)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    # -- reading -------------------------------------------------------------------------------

    def stored_size(self) -> int:
        """How many leaves the table covers."""
        with self._backend.reader.connect() as conn:
            return _stored_size(conn)

    def subtrees(self, ranges: Iterable[Range], size: int) -> dict[Range, bytes]:
        """The hash of each subtree ``[start, end)`` of the tree of ``size`` leaves, from the
        stored nodes (which must cover ``size``: :meth:`extend` first)."""
        wanted = {r: complete_parts(*r) for r in set(ranges)}
        for start, end in wanted:
            if end > size:
                raise ValueError(f"[{start}, {end}) is not in a tree of {size} leaves")
        with self._backend.reader.connect() as conn:
            found = _nodes(conn, {n for parts in wanted.values() for n in parts})
        return {r: _fold([found[n] for n in parts]) for r, parts in wanted.items()}

    def root(self, size: int) -> bytes:
        return EMPTY_ROOT if size == 0 else self.subtrees([(0, size)], size)[(0, size)]

    # -- writing -------------------------------------------------------------------------------

    def extend(self, upto: int, page: int = PAGE) -> int:
        """Store the nodes of the first ``upto`` leaves that are not stored yet, one page of
        events per transaction; returns the size now stored (at least ``upto``)."""
        have = self.stored_size()  # caught up: no write lock taken, appenders never wait
        if have >= upto:
            return have
        while True:
            with self._backend.writer.begin() as conn:
                have = _stored_size(conn)
                if have >= upto:
                    return have
                self._extend_page(conn, have, min(have + page, upto))

    def rebuild(self, upto: int, page: int = PAGE) -> int:
        """Forget every stored node and recompute them from the log (needs DELETE: on
        PostgreSQL the owner of the tables)."""
        with self._backend.writer.begin() as conn:
            conn.execute(delete(MERKLE_NODES))
        return self.extend(upto, page)

    def _extend_page(self, conn: Connection, have: int, upto: int) -> None:
        rows = conn.execute(
            select(EVENTS.c.seq, EVENTS.c.hash)
            .where(EVENTS.c.seq > have, EVENTS.c.seq <= upto)
            .order_by(EVENTS.c.seq)
        ).all()
        # The right edge of the stored tree: what the new leaves merge into.
        stack: list[tuple[int, int, bytes]] = []
        if have:
            parts = complete_parts(0, have)
            found = _nodes(conn, set(parts))
            stack = [(level, index, found[(level, index)]) for level, index in parts]
        new: list[dict[str, object]] = []
        expected = have + 1
        for seq, event_hash in rows:
            if seq != expected:
                break
            try:
                leaf = event_leaf(str(event_hash))
            except ValueError:
                raise MerkleStateError(
                    f"the hash of seq {seq} is not a sha256 hash: the log's Merkle tree cannot "
                    "be extended past it.",
                    hint="Run `gateway audit verify`; the row was altered.",
                ) from None
            node = (0, seq - 1, leaf)
            while True:
                new.append({"level": node[0], "node_index": node[1], "hash": node[2]})
                if not stack or stack[-1][0] != node[0]:
                    break
                left = stack.pop()
                node = (node[0] + 1, left[1] >> 1, node_hash(left[2], node[2]))
            stack.append(node)
            expected += 1
        if expected <= upto:
            raise MerkleStateError(
                f"seq {expected} is missing from the log: its Merkle tree cannot be built.",
                hint="Run `gateway audit verify`; the log is not whole.",
            )
        dialect = postgresql if self._backend.dialect == "postgresql" else sqlite
        # RETURNING counts the rows written (an executemany's rowcount is not reliable on
        # PostgreSQL: it read every node back), so only a conflict is compared.
        statement = (
            dialect.insert(MERKLE_NODES).on_conflict_do_nothing().returning(MERKLE_NODES.c.level)
        )
        for at in range(0, len(new), 5_000):
            chunk = new[at : at + 5_000]
            written = len(conn.execute(statement, chunk).all())
            if written != len(chunk):  # a row was there already
                _check_existing(conn, chunk)


def _check_existing(conn: Connection, computed: list[dict[str, object]]) -> None:
    """A node already stored where this extension computed one must be the same hash: a row
    inserted ahead of time (INSERT alone suffices) under a future position would otherwise
    stand in for the real node, and every root and proof built on it would be wrong while
    still agreeing with each other. Another extender racing this one stores the same hash."""
    wanted = {(int(str(r["level"])), int(str(r["node_index"]))): r["hash"] for r in computed}
    stored = _nodes(conn, set(wanted))
    for node, value in wanted.items():
        if stored[node] != value:
            raise MerkleStateError(
                f"the stored Merkle node (level {node[0]}, index {node[1]}) is not the hash "
                "computed from the log: it was written ahead of its leaves or altered.",
                hint="Run `gateway audit tree-head --rebuild` (as the tables' owner), then "
                "`gateway audit verify`.",
            )


def _stored_size(conn: Connection) -> int:
    top = conn.execute(
        select(func.max(MERKLE_NODES.c.node_index)).where(MERKLE_NODES.c.level == 0)
    ).scalar_one_or_none()
    return 0 if top is None else int(top) + 1


def _nodes(conn: Connection, wanted: Collection[Node]) -> dict[Node, bytes]:
    """The stored hashes of ``wanted``, by primary key; :class:`MerkleStateError` if one
    is missing or is not a hash."""
    pending = sorted(wanted)
    found: dict[Node, bytes] = {}
    for at in range(0, len(pending), LOOKUP_CHUNK):
        chunk = pending[at : at + LOOKUP_CHUNK]
        # OR of primary-key equalities, not a row-value IN: SQLite scans the whole table
        # for ``(level, node_index) IN (VALUES ...)`` but seeks the key for each OR term.
        keys = [
            (MERKLE_NODES.c.level == level) & (MERKLE_NODES.c.node_index == index)
            for level, index in chunk
        ]
        rows = conn.execute(
            select(MERKLE_NODES.c.level, MERKLE_NODES.c.node_index, MERKLE_NODES.c.hash).where(
                or_(*keys)
            )
        ).all()
        for level, index, stored in rows:
            found[(int(level), int(index))] = bytes(stored)
    for node in pending:
        value = found.get(node)
        if value is None or len(value) != HASH_SIZE:
            what = "missing" if value is None else "not a 32-byte hash"
            raise MerkleStateError(
                f"the stored Merkle node (level {node[0]}, index {node[1]}) is {what}.",
                hint="Run `gateway audit tree-head --rebuild` to recompute the tree from the log.",
            )
    return found
