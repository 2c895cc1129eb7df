"""An RFC 6962 / RFC 9162 Merkle tree over the audit log: tree heads, proofs, verification.

    leaves = [leaf_hash(event_entry(h)) for h in hashes]       # event hashes, in seq order
    head = tree_head(leaves)                                  # TreeHead(size, root)
    proof = inclusion_proof(leaves, index=4, size=head.size)
    verify_inclusion(leaves[4], 4, head.size, proof, head.root)   # ProofError if not
    verify_consistency(m, n, consistency_proof(leaves, m, n), old_root, head.root)

Hashing is RFC 9162 §2.1.1 with SHA-256: a leaf is ``H(0x00 || entry)``, an inner node
``H(0x01 || left || right)``, and the tree of ``n`` leaves splits at the largest power of two
below ``n``. The empty tree's root is ``H("")``.

**The entry** of event ``seq`` is leaf index ``seq - 1`` and its bytes are the 32 raw bytes
of the event's ``hash`` column (:func:`event_entry`: the digest of ``"sha256:…"``, decoded).
Not the body: the hash already covers the body and ``prev_hash``, so a leaf commits to the
event and, through the chain, to everything before it; the tree is built from one short
column, never from bodies; and a receipt carries the body and ``prev_hash`` so that a reader
recomputes the hash, and from it the leaf, without trusting the hash it was given.

The proof functions take the leaf hashes as an *iterable* and stream them once, holding only
the log2(n) subtrees of the right edge and the hashes the proof needs (:func:`scan`): memory
is flat whatever the size of the log. The verification functions are pure (no I/O) and
raise :class:`ProofError` saying why a proof is refused; they follow RFC 9162 §2.1.3.2
(inclusion) and §2.1.4.2 (consistency) step by step. As in RFC 6962, a root does not commit
to the tree's size: a proof checked against a wrong size of the same shape (leaf 0 of 129 or
130 leaves) reaches the same root. The size is bound by the signed checkpoint that carries
it beside the root, never by the proof alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

# A subtree as the half-open range of leaf indices [start, end) it covers.
Range = tuple[int, int]


class ProofError(ValueError):
    """A proof that does not prove what it claims; the message says why."""


class TreeHead(NamedTuple):
    size: int
    root: bytes


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def event_entry(event_hash: str) -> bytes:
    """The Merkle entry of an event: the raw bytes of its ``sha256:<64 hex>`` hash."""
    prefix, _, hexdigest = event_hash.partition(":")
    try:
        raw = bytes.fromhex(hexdigest) if prefix == "sha256" and len(hexdigest) == 64 else b""
    except ValueError:
        raw = b""
    if len(raw) != HASH_SIZE:
        raise ValueError(f"{event_hash[:80]!r} is not a sha256:<64 hex> event hash")
    return raw


def event_leaf(event_hash: str) -> bytes:
    """The leaf hash of an event, from its hash column: ``H(0x00 || raw hash)``."""
    return leaf_hash(event_entry(event_hash))


def _split(n: int) -> int:
    """The largest power of two strictly below ``n`` (n >= 2): where RFC 9162 splits."""
    return 1 << ((n - 1).bit_length() - 1)


# -- which subtrees a proof is made of ---------------------------------------------------------


def inclusion_path(index: int, size: int) -> list[Range]:
    """The subtrees whose hashes are the inclusion proof of leaf ``index`` in the tree of
    ``size`` leaves, leaf to root (RFC 9162 §2.1.3.1, PATH)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    path: list[Range] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append((start + k, end))
            end = start + k
        else:
            path.append((start, start + k))
            start += k
    path.reverse()
    return path


def consistency_path(old_size: int, new_size: int) -> list[Range]:
    """The subtrees whose hashes are the consistency proof from the tree of ``old_size``
    leaves to the tree of ``new_size`` (RFC 9162 §2.1.4.1, PROOF and SUBPROOF); empty when
    ``old_size`` is 0 or equals ``new_size``."""
    if not 0 <= old_size <= new_size:
        raise ValueError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size in (0, new_size):
        return []
    path: list[Range] = []
    m, start, end, whole = old_size, 0, new_size, True
    while True:
        n = end - start
        if m == n:
            if not whole:
                path.append((start, end))
            break
        k = _split(n)
        if m <= k:
            path.append((start + k, end))
            end = start + k
        else:
            path.append((start, start + k))
            m -= k
            start += k
            whole = False
    path.reverse()
    return path


# -- hashing the subtrees, streaming -----------------------------------------------------------


class Scan(NamedTuple):
    """What one pass over the leaves found: the hash of each wanted subtree, and the root
    of each wanted prefix (the tree of that many leaves)."""

    size: int
    hashes: Mapping[Range, bytes]
    roots: Mapping[int, bytes]


def _fold(stack: Sequence[tuple[int, int, bytes]], down_to: int = 0) -> bytes:
    """The hash of the stack's subtrees from ``down_to`` on, merged right to left: the
    RFC 6962 hash of the leaves they cover, which end at the right edge."""
    acc = stack[-1][2]
    for _, _, left in reversed(stack[down_to:-1]):
        acc = node_hash(left, acc)
    return acc


def scan(
    leaves: Iterable[bytes],
    size: int,
    wanted: Collection[Range] = (),
    roots_at: Collection[int] = (),
) -> Scan:
    """Stream the first ``size`` leaf hashes once, keeping the hashes of the ``wanted``
    subtrees (each a subtree of the tree of ``size`` leaves, as proofs name them) and the
    roots of the trees of each size in ``roots_at`` (each at most ``size``).

    The stack holds the perfect subtrees of the leaves seen so far (at most log2 of their
    number): a perfect subtree is completed exactly once, when its last leaf arrives, and a
    subtree on the right edge of the tree is the fold of the stack's tail at the end.
    :class:`ValueError` if the leaves run out before ``size``.
    """
    want = set(wanted)
    found: dict[Range, bytes] = {}
    roots: dict[int, bytes] = {0: EMPTY_ROOT} if 0 in roots_at else {}
    snapshots = set(roots_at)
    stack: list[tuple[int, int, bytes]] = []  # (start, width, hash), widths decreasing
    count = 0
    for leaf in leaves:
        if count == size:
            break
        node = (count, 1, leaf)
        count += 1
        while True:
            if want and (node[0], node[0] + node[1]) in want:
                found[(node[0], node[0] + node[1])] = node[2]
            if not stack or stack[-1][1] != node[1]:
                break
            left = stack.pop()
            node = (left[0], left[1] * 2, node_hash(left[2], node[2]))
        stack.append(node)
        if count in snapshots:
            roots[count] = _fold(stack)
    if count < size:
        raise ValueError(f"the tree has {count} leaves, not {size}")
    for at in range(len(stack)):  # the right edge: subtrees [start, size)
        edge = (stack[at][0], size)
        if edge in want and edge not in found:
            found[edge] = _fold(stack, at)
    missing = want - found.keys()
    if missing:
        raise ValueError(f"{sorted(missing)[0]} is not a subtree of a tree of {size} leaves")
    return Scan(size, found, roots)


def tree_head(leaves: Iterable[bytes], size: int | None = None) -> TreeHead:
    """The tree head of the first ``size`` leaves (all of them when None)."""
    if size is None:
        leaves = list(leaves)
        size = len(leaves)
    return TreeHead(size, scan(leaves, size, roots_at=(size,)).roots[size])


def inclusion_proof(leaves: Iterable[bytes], index: int, size: int) -> list[bytes]:
    path = inclusion_path(index, size)
    hashes = scan(leaves, size, path).hashes
    return [hashes[r] for r in path]


def inclusion_proofs(
    leaves: Iterable[bytes], indices: Iterable[int], size: int
) -> dict[int, list[bytes]]:
    """The inclusion proofs of several leaves, from one pass over the leaves."""
    paths = {index: inclusion_path(index, size) for index in indices}
    hashes = scan(leaves, size, {r for path in paths.values() for r in path}).hashes
    return {index: [hashes[r] for r in path] for index, path in paths.items()}


def consistency_proof(leaves: Iterable[bytes], old_size: int, new_size: int) -> list[bytes]:
    path = consistency_path(old_size, new_size)
    hashes = scan(leaves, new_size, path).hashes
    return [hashes[r] for r in path]


# -- verifying, pure ---------------------------------------------------------------------------


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise ProofError(f"{what} is {len(value)} bytes, not a {HASH_SIZE}-byte SHA-256 hash")


def root_from_inclusion_proof(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` leads to from ``leaf`` at ``index`` (RFC 9162 §2.1.3.2,
    steps 1-3); :class:`ProofError` if the proof cannot be one for that position."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is not in a tree of {size} leaves")
    _check_hash(leaf, "the leaf hash")
    fn, sn, r = index, size - 1, leaf
    for n, p in enumerate(proof):
        _check_hash(p, f"proof node {n}")
        if sn == 0:
            raise ProofError(
                f"the proof has {len(proof)} nodes, more than leaf {index} of {size} needs"
            )
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(
            f"the proof has {len(proof)} nodes, fewer than leaf {index} of {size} needs"
        )
    return r


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """:class:`ProofError` unless ``proof`` proves ``leaf`` is leaf ``index`` of the tree
    of ``size`` leaves whose root is ``root``."""
    _check_hash(root, "the root")
    if root_from_inclusion_proof(leaf, index, size, proof) != root:
        raise ProofError(
            f"the inclusion proof of leaf {index} leads to another root than the tree's: "
            "the entry, the proof or the root was altered"
        )


def verify_consistency(
    old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes
) -> None:
    """:class:`ProofError` unless ``proof`` proves that the tree of ``new_size`` leaves
    with root ``new_root`` extends the tree of ``old_size`` with root ``old_root``: its
    first ``old_size`` leaves are exactly those (RFC 9162 §2.1.4.2)."""
    _check_hash(old_root, "the old root")
    _check_hash(new_root, "the new root")
    for n, c in enumerate(proof):
        _check_hash(c, f"proof node {n}")
    if old_size < 0 or old_size > new_size:
        raise ProofError(
            f"a tree of {new_size} leaves cannot extend one of {old_size}: the log shrank"
        )
    if old_size == new_size:
        if proof:
            raise ProofError("two trees of the same size need an empty proof")
        if old_root != new_root:
            raise ProofError(f"two different trees of {old_size} leaves: the log forked")
        return
    if old_size == 0:
        if proof:
            raise ProofError("any tree extends the empty tree, with an empty proof")
        return
    if not proof:
        raise ProofError(f"an empty proof cannot show that size {new_size} extends {old_size}")
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # an exact power of two: the old root is a node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError(f"the proof has more nodes than {old_size} to {new_size} needs")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"the proof has fewer nodes than {old_size} to {new_size} needs")
    if fr != old_root:
        raise ProofError(
            f"the first {old_size} leaves of the tree of {new_size} are not the tree of "
            f"{old_size} leaves: the log forked or was rewritten after the older head"
        )
    if sr != new_root:
        raise ProofError(
            f"the proof does not lead to the root of the tree of {new_size} leaves: the "
            "proof or the newer root was altered"
        )
