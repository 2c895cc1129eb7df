"""The Merkle tree: published RFC 6962 vectors, then random trees and tampered proofs.

The vectors are the 8-leaf tree of transparency-dev/merkle, proof/verify_test.go (Apache-2.0;
the same tree as Trillian's and the Certificate Transparency reference code's): its leaves,
the roots of its prefixes of 1..8 leaves, and its inclusion and consistency proofs (there
``leaf`` is 1-based; here indices are 0-based). Its tamperings (``corruptInclusionProof``,
``corruptConsistencyProof``) are applied to every vector as well.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.proofs.merkle import (
    EMPTY_ROOT,
    ProofError,
    consistency_path,
    consistency_proof,
    event_entry,
    event_leaf,
    inclusion_path,
    inclusion_proof,
    inclusion_proofs,
    leaf_hash,
    node_hash,
    root_from_inclusion_proof,
    scan,
    tree_head,
    verify_consistency,
    verify_inclusion,
)

h = bytes.fromhex

LEAVES = [
    h(""),
    h("00"),
    h("10"),
    h("2021"),
    h("3031"),
    h("40414243"),
    h("5051525354555657"),
    h("606162636465666768696a6b6c6d6e6f"),
]
ROOTS = [
    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]
# (leaf index, tree size, proof)
INCLUSION = [
    (0, 1, []),
    (
        0,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        5,
        8,
        [
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (2, 3, [h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (
        1,
        5,
        [
            h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
]
# (old size, new size, proof)
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        5,
        [
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (
        6,
        7,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
]
SOME_HASH = h("abacaba000000000000000000000000000000000000000000060061e00123456")
LEAF_HASHES = [leaf_hash(e) for e in LEAVES]


def flipped(proof: list[bytes], at: int, mask: int) -> list[bytes]:
    copy = list(proof)
    copy[at] = bytes([copy[at][0] ^ mask]) + copy[at][1:]
    return copy


def refused_inclusion(leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes) -> bool:
    try:
        verify_inclusion(leaf, index, size, proof, root)
    except ProofError:
        return True
    return False


def refused_consistency(m: int, n: int, proof: list[bytes], r1: bytes, r2: bytes) -> bool:
    try:
        verify_consistency(m, n, proof, r1, r2)
    except ProofError:
        return True
    return False


# -- the published vectors ---------------------------------------------------------------------


def test_the_empty_tree_hashes_to_the_hash_of_nothing() -> None:
    assert hashlib.sha256(b"").digest() == EMPTY_ROOT
    assert tree_head([]).root == EMPTY_ROOT


@pytest.mark.parametrize("size", range(1, 9))
def test_roots_of_every_prefix_match_the_published_roots(size: int) -> None:
    assert tree_head(LEAF_HASHES, size).root == ROOTS[size - 1]
    assert tree_head(LEAF_HASHES[:size]) == (size, ROOTS[size - 1])


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_inclusion_proofs_match_and_verify_as_published(
    index: int, size: int, proof: list[bytes]
) -> None:
    assert inclusion_proof(LEAF_HASHES, index, size) == proof
    leaf, root = LEAF_HASHES[index], ROOTS[size - 1]
    assert root_from_inclusion_proof(leaf, index, size, proof) == root
    verify_inclusion(leaf, index, size, proof, root)


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_the_published_tamperings_of_inclusion_proofs_are_refused(
    index: int, size: int, proof: list[bytes]
) -> None:
    leaf, root = LEAF_HASHES[index], ROOTS[size - 1]
    probes = [
        (index - 1, size, root, leaf, proof),
        (index + 1, size, root, leaf, proof),
        (index ^ 2, size, root, leaf, proof),
        (index, size * 2, root, leaf, proof),
        (index, size // 2, root, leaf, proof),
        (index, size, root, b"WrongLeaf", proof),
        (index, size, EMPTY_ROOT, leaf, proof),
        (index, size, SOME_HASH, leaf, proof),
        (index, size, root, leaf, [*proof, b""]),
        (index, size, root, leaf, [*proof, root]),
        (index, size, root, leaf, [b"", *proof]),
        (index, size, root, leaf, [root, *proof]),
    ]
    probes += [(index, size, root, leaf, flipped(proof, i, 8)) for i in range(len(proof))]
    if proof:
        probes.append((index, size, root, leaf, proof[:-1]))
    if len(proof) > 1:
        probes.append((index, size, root, leaf, [proof[0], SOME_HASH, *proof[1:]]))
    for i, s, r, lf, p in probes:
        assert refused_inclusion(lf, i, s, p, r), (i, s, lf, p)


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_consistency_proofs_match_and_verify_as_published(
    old: int, new: int, proof: list[bytes]
) -> None:
    assert consistency_proof(LEAF_HASHES, old, new) == proof
    verify_consistency(old, new, proof, ROOTS[old - 1], ROOTS[new - 1])


@pytest.mark.parametrize(("old", "new", "proof"), [c for c in CONSISTENCY if c[2]])
def test_the_published_tamperings_of_consistency_proofs_are_refused(
    old: int, new: int, proof: list[bytes]
) -> None:
    r1, r2 = ROOTS[old - 1], ROOTS[new - 1]
    probes = [
        (old - 1, new, r1, r2, proof),
        (old + 1, new, r1, r2, proof),
        (old ^ 2, new, r1, r2, proof),
        (old, new * 2, r1, r2, proof),
        (old, new // 2, r1, r2, proof),
        (old, new, b"WrongRoot", r2, proof),
        (old, new, r1, b"WrongRoot", proof),
        (old, new, r2, r1, proof),
        (old, new, r1, r2, []),
        (old, new, r1, r2, [*proof, b""]),
        (old, new, r1, r2, [*proof, r1]),
        (old, new, r1, r2, [*proof, r2]),
        (old, new, r1, r2, [b"", *proof]),
        (old, new, r1, r2, [r1, *proof]),
        (old, new, r1, r2, [r2, *proof]),
        (old, new, r1, r2, [proof[0], *proof]),
        (old, new, r1, r2, proof[:-1]),
    ]
    probes += [(old, new, r1, r2, flipped(proof, i, 16)) for i in range(len(proof))]
    for m, n, a, b, p in probes:
        assert refused_consistency(m, n, p, a, b), (m, n, p)


def test_consistency_edge_cases_follow_the_reference_verifier() -> None:
    root1, root2 = SOME_HASH, EMPTY_ROOT
    verify_consistency(0, 0, [], root1, root1)
    verify_consistency(0, 1, [], root1, root2)
    verify_consistency(1, 1, [], root2, root2)
    assert refused_consistency(1, 1, [], root1, root2)  # same size, different trees: a fork
    assert refused_consistency(1, 0, [], root1, root2)  # the log shrank
    assert refused_consistency(2, 1, [], root1, root2)
    assert refused_consistency(1, 2, [], root1, root2)  # an empty proof proves nothing
    assert refused_consistency(0, 1, [EMPTY_ROOT], root2, root2)
    assert refused_consistency(1, 1, [EMPTY_ROOT], root2, root2)


def test_inclusion_of_a_single_entry_and_impossible_positions() -> None:
    leaf = leaf_hash(b"data")
    verify_inclusion(leaf, 0, 1, [], leaf)
    for index, size in [(0, 0), (1, 0), (1, 1), (2, 1), (-1, 3)]:
        assert refused_inclusion(SOME_HASH, index, size, [], EMPTY_ROOT)
    assert refused_inclusion(leaf, 0, 1, [], b"")  # a root of the wrong length


def test_an_event_entry_is_the_raw_bytes_of_its_hash() -> None:
    digest = "sha256:" + "ab" * 32
    assert event_entry(digest) == bytes.fromhex("ab" * 32)
    assert event_leaf(digest) == hashlib.sha256(b"\x00" + bytes.fromhex("ab" * 32)).digest()
    for bad in ["sha256:" + "ab" * 31, "md5:" + "ab" * 32, "ab" * 32, "sha256:" + "zz" * 32]:
        with pytest.raises(ValueError, match="not a sha256"):
            event_entry(bad)


def test_a_root_does_not_commit_to_the_size_so_the_checkpoint_must() -> None:
    """RFC 6962's property, pinned: leaf 0's proof in a tree of 130 leaves also verifies as
    leaf 0 of 129 against the same root. Receipts check the size the signed note carries."""
    leaves = random_leaves(130, 1)
    root = tree_head(leaves).root
    proof = inclusion_proof(leaves, 0, 130)
    verify_inclusion(leaves[0], 0, 129, proof, root)
    assert inclusion_shape(0, 129, len(proof)) == inclusion_shape(0, 130, len(proof))


def test_a_scan_refuses_a_tree_shorter_than_asked() -> None:
    with pytest.raises(ValueError, match="has 3 leaves, not 5"):
        scan(LEAF_HASHES[:3], 5)


# -- random trees ------------------------------------------------------------------------------


def reference_root(leaves: list[bytes]) -> bytes:
    """RFC 9162 §2.1.1 MTH, recursively, as the RFC writes it."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return node_hash(reference_root(leaves[:k]), reference_root(leaves[k:]))


def inclusion_shape(index: int, size: int, length: int) -> list[bool] | None:
    """The left/right turns RFC 9162's inclusion check takes for a proof of ``length``
    nodes (None when it refuses the length): two sizes with the same shape reach the same
    root from the same proof, because a root does not commit to the size (the signed
    checkpoint does)."""
    if not 0 <= index < size:
        return None
    fn, sn, turns = index, size - 1, []
    for _ in range(length):
        if sn == 0:
            return None
        turns.append(bool(fn & 1 or fn == sn))
        if turns[-1]:
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        fn, sn = fn >> 1, sn >> 1
    return turns if sn == 0 else None


def consistency_shape(old: int, new: int, length: int) -> tuple[bool, list[bool]] | None:
    """As :func:`inclusion_shape`, for RFC 9162's consistency check."""
    if not 0 < old < new:
        return None
    prepended = old & (old - 1) == 0
    fn, sn, turns = old - 1, new - 1, []
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    for _ in range(length + prepended - 1):
        if sn == 0:
            return None
        turns.append(bool(fn & 1 or fn == sn))
        if turns[-1]:
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        fn, sn = fn >> 1, sn >> 1
    return (prepended, turns) if sn == 0 else None


def random_leaves(size: int, seed: int) -> list[bytes]:
    return [leaf_hash(f"{seed}/{i}".encode()) for i in range(size)]


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_every_leaf_of_a_random_tree_is_proven_and_its_root_is_the_rfcs(
    size: int, seed: int
) -> None:
    leaves = random_leaves(size, seed)
    root = tree_head(leaves).root
    assert root == reference_root(leaves)
    proofs = inclusion_proofs(leaves, range(size), size)
    for index in range(size):
        proof = proofs[index]
        assert len(proof) == len(inclusion_path(index, size))
        verify_inclusion(leaves[index], index, size, proof, root)
    assert proofs[size // 2] == inclusion_proof(iter(leaves), size // 2, size)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_tampered_inclusion_proof_is_refused(data: st.DataObject) -> None:
    """Any flipped bit of a node, leaf or root, any other index, and any other size but one
    whose proof has the very same shape (see :func:`inclusion_shape`)."""
    size = data.draw(st.integers(1, 200))
    index = data.draw(st.integers(0, size - 1))
    leaves = random_leaves(size, size)
    root = tree_head(leaves).root
    proof = inclusion_proof(leaves, index, size)
    verify_inclusion(leaves[index], index, size, proof, root)
    if proof:
        at = data.draw(st.integers(0, len(proof) - 1))
        byte = data.draw(st.integers(0, 31))
        bit = data.draw(st.integers(0, 7))
        bad = list(proof)
        node = bytearray(bad[at])
        node[byte] ^= 1 << bit
        bad[at] = bytes(node)
        assert refused_inclusion(leaves[index], index, size, bad, root)
    wrong_index = data.draw(st.integers(-1, size).filter(lambda i: i != index))
    assert refused_inclusion(leaves[index], wrong_index, size, proof, root)
    assert refused_inclusion(leaves[index], index, size * 2, proof, root)
    assert refused_inclusion(leaves[index], index, size // 2, proof, root)
    wrong_size = data.draw(st.integers(0, 2 * size + 2).filter(lambda s: s != size))
    if inclusion_shape(index, wrong_size, len(proof)) != inclusion_shape(index, size, len(proof)):
        assert refused_inclusion(leaves[index], index, wrong_size, proof, root)
    leaf = bytearray(leaves[index])
    leaf[data.draw(st.integers(0, 31))] ^= 1
    assert refused_inclusion(bytes(leaf), index, size, proof, root)
    root_bad = bytearray(root)
    root_bad[data.draw(st.integers(0, 31))] ^= 0x80
    assert refused_inclusion(leaves[index], index, size, proof, bytes(root_bad))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_consistency_proof_between_random_sizes_verifies(data: st.DataObject) -> None:
    new = data.draw(st.integers(0, 260))
    old = data.draw(st.integers(0, new))
    leaves = random_leaves(new, 7)
    proof = consistency_proof(leaves, old, new)
    assert len(proof) == len(consistency_path(old, new))
    found = scan(leaves, new, roots_at=(old, new)).roots
    assert found[old] == reference_root(leaves[:old])
    verify_consistency(old, new, proof, found[old], found[new])


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_tampered_consistency_proof_is_refused(data: st.DataObject) -> None:
    new = data.draw(st.integers(2, 260))
    old = data.draw(st.integers(1, new - 1))
    leaves = random_leaves(new, 11)
    roots = scan(leaves, new, roots_at=(old, new)).roots
    r1, r2 = roots[old], roots[new]
    proof = consistency_proof(leaves, old, new)
    verify_consistency(old, new, proof, r1, r2)
    at = data.draw(st.integers(0, len(proof) - 1))
    node = bytearray(proof[at])
    node[data.draw(st.integers(0, 31))] ^= 1 << data.draw(st.integers(0, 7))
    assert refused_consistency(old, new, [*proof[:at], bytes(node), *proof[at + 1 :]], r1, r2)
    shape = consistency_shape(old, new, len(proof))
    wrong_old = data.draw(st.integers(0, new + 1).filter(lambda m: m != old))
    if consistency_shape(wrong_old, new, len(proof)) != shape:
        assert refused_consistency(wrong_old, new, proof, r1, r2)
    assert refused_consistency(old, new * 2, proof, r1, r2)
    wrong_new = data.draw(st.integers(0, 2 * new).filter(lambda n: n != new))
    if consistency_shape(old, wrong_new, len(proof)) != shape:
        assert refused_consistency(old, wrong_new, proof, r1, r2)
    assert refused_consistency(old, new, proof[:-1], r1, r2)
    assert refused_consistency(old, new, [*proof, r2], r1, r2)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_forked_log_has_no_consistency_proof(data: st.DataObject) -> None:
    """Two logs that share a prefix, then differ at one leaf: no proof from the other log's
    older head verifies against this log, however it was made."""
    new = data.draw(st.integers(2, 200))
    old = data.draw(st.integers(1, new - 1))
    changed = data.draw(st.integers(0, old - 1))
    ours = random_leaves(new, 3)
    theirs = list(ours)
    theirs[changed] = leaf_hash(b"rewritten")
    their_old_root = tree_head(theirs, old).root
    proof = consistency_proof(ours, old, new)
    assert refused_consistency(old, new, proof, their_old_root, tree_head(ours).root)
