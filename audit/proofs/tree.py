"""The log's Merkle tree, from the stored subtree hashes or streamed from the log.

    found = tree_hashes(store, size, inclusion_path(4, size), roots_at=(size,))
    proof = stored_consistency_proof(store, old_size, new_size)

:func:`tree_hashes` extends the stored tree (audit.proofs.merkle_store) to ``size`` and reads the
O(log n) nodes it needs; where the table cannot be written (a read-only file or role) it
streams the ``hash`` column instead (:func:`log_leaves`, keyset pages, flat memory, O(n)).
Nothing here is trusted by itself: audit.proofs.receipts checks every proof against the root
before it signs, and a witness checks a consistency proof against the two roots.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from audit.proofs.merkle import EMPTY_ROOT, Range, Scan, consistency_path, event_leaf, scan
from audit.proofs.merkle_store import MerkleState, MerkleStateError
from audit.store import AuditStore
from audit.store.schema import EVENTS

LEAF_PAGE = 20_000  # hash-column rows read at a time while a proof streams the leaves


def log_leaves(store: AuditStore, upto: int) -> Iterator[bytes]:
    """The leaf hashes of events 1..``upto``, streamed in keyset pages of the hash column;
    :class:`MerkleStateError` if a seq is missing or a hash is not one (run verify)."""
    reader = store.backend.reader  # the store's read engine; only the hash column is read
    last = 0
    while last < upto:
        with reader.connect() as conn:
            rows = conn.execute(
                select(EVENTS.c.seq, EVENTS.c.hash)
                .where(EVENTS.c.seq > last, EVENTS.c.seq <= upto)
                .order_by(EVENTS.c.seq)
                .limit(LEAF_PAGE)
            ).all()
        if not rows:
            return
        for seq, event_hash in rows:
            if seq != last + 1:
                raise MerkleStateError(
                    f"seq {last + 1} is missing from the log: its Merkle tree cannot be built.",
                    hint="Run `gateway audit verify`; the log is not whole.",
                )
            try:
                yield event_leaf(str(event_hash))
            except ValueError:
                raise MerkleStateError(
                    f"the hash of seq {seq} is not a sha256 hash.",
                    hint="Run `gateway audit verify`; the row was altered.",
                ) from None
            last = seq


def tree_hashes(
    store: AuditStore, size: int, wanted: Iterable[Range] = (), roots_at: Iterable[int] = ()
) -> Scan:
    """The hashes of the ``wanted`` subtrees of the tree of ``size`` leaves and the roots of
    the trees of each size in ``roots_at``: from the stored tree, extended to ``size`` first
    (O(log n) reads), or streamed from the log if the stored tree cannot be written."""
    want, sizes = set(wanted), set(roots_at)
    state = MerkleState(store.backend)
    try:
        state.extend(size)
    except SQLAlchemyError:  # a read-only file or role: the log itself still answers
        return scan(log_leaves(store, size), size, want, sizes)
    hashes = state.subtrees(want | {(0, s) for s in sizes if s}, size)
    roots = {s: hashes[(0, s)] if s else EMPTY_ROOT for s in sizes}
    return Scan(size, {r: hashes[r] for r in want}, roots)


def stored_consistency_proof(store: AuditStore, old_size: int, new_size: int) -> list[bytes]:
    """The consistency proof from the log's tree of ``old_size`` events to its tree of
    ``new_size``, from the stored tree (a witness checks it against the two roots)."""
    if new_size > store.head()[0]:
        raise MerkleStateError(
            f"the log holds {store.head()[0]} events, fewer than the checkpoint's {new_size}: "
            "it was truncated or rolled back, or this is another copy of it"
        )
    path = consistency_path(old_size, new_size)
    hashes = tree_hashes(store, new_size, path).hashes
    return [hashes[r] for r in path]


def rebuild_tree(store: AuditStore) -> int:
    """Recompute the stored tree from the log; returns the number of leaves now stored."""
    return MerkleState(store.backend).rebuild(store.head()[0])
