"""Receipts: a request's events proven into a signed Merkle tree head, checked offline.

    receipt = make_receipt(store, "req-1", key)              # key: the checkpoint key's seed
    text = dumps(receipt)                                    # what `audit prove -o` writes
    head = signed_head(store, key)                           # what `audit tree-head` writes
    # checking them: audit.proofs.receipt_checks (check_receipt, check_consistency)

**The tree** is audit.proofs.merkle's over the log: leaf ``seq - 1`` is the raw bytes of event
``seq``'s hash. Its complete subtrees are stored (audit.proofs.merkle_store, table
``merkle_nodes``), derived from the log and extended from the highest stored leaf before each
proof, so a proof or a tree head costs O(log n) reads once the table has caught up (the
events appended since the last proof are hashed once). The stored rows are not trusted:
every inclusion proof a receipt carries is checked against the root its checkpoint's note
signs before the receipt is written, and the receipt then against the check a reader runs;
a stored tree that covers more leaves than the log has events is refused. On a format-2 log
no stored node decides a root either: receipts and tree heads take theirs from the
integrator's signed checkpoints (audit.sequenced.receipts).
Where the table cannot be written (a read-only database or role) the hash column is streamed
instead, in flat memory (O(n) reads). ``verify --from/--to`` always streams the log: it is
the check that the log still holds the trees the checkpoints signed.

**The checkpoint** is a C2SP signed note in the tlog-checkpoint format
(https://c2sp.org/tlog-checkpoint, https://c2sp.org/signed-note): the origin line
(:func:`origin` of the store's id), the tree size, the base64 root, a blank line, and an
Ed25519 signature line ``— <origin> base64(key ID || signature)`` by the checkpoint key
(``GATEWAY_CHECKPOINT_KEY``), key ID = SHA-256(origin || 0x0A || 0x01 || public key)[:4].
Any C2SP verifier given the public key checks it; the JSON around it repeats the note's
fields for a reader, and a file whose fields differ from its note is refused.

**A receipt** holds the checkpoint and, for each of the request's events, its ``seq``,
``prev_hash``, ``hash``, body (the hashed bytes as text), inclusion proof, and record
signature with its key id (checked offline against the record public keys a reader trusts).
The check (audit.proofs.receipt_checks) recomputes each hash from ``prev_hash`` and the body,
the leaf from the hash, the root from the proof, and compares it with the signed root: an
altered body, proof node, root, size or signature is refused with the reason. A receipt
proves that these events are in the log the key holder signed; it does not prove that the
request has no other event.
"""

from __future__ import annotations

from collections.abc import Iterable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.exc import SQLAlchemyError

from audit.errors import NotFound
from audit.proofs.merkle import (
    ProofError,
    Scan,
    TreeHead,
    event_leaf,
    inclusion_path,
    verify_consistency,
    verify_inclusion,
)
from audit.proofs.merkle_store import MerkleState
from audit.proofs.receipt_checks import check_receipt
from audit.proofs.receipt_files import (
    CHECKPOINT_FORMAT,
    MAX_FILE,
    ORIGIN_PREFIX,
    RECEIPT_FORMAT,
    Consistency,
    ProvenEvent,
    Receipt,
    ReceiptError,
    TreeCheckpoint,
    _b64,
    checked_checkpoint,
    dumps,
    load_checkpoint,
    load_receipt,
    origin,
    sign_checkpoint,
)
from audit.proofs.signed_note import (
    EM_DASH,
    MAX_NOTE,
    note_key_id,
    open_note,
    public_raw_of,
    sign_note,
    verifier_key,
)
from audit.proofs.tree import (
    LEAF_PAGE,
    log_leaves,
    rebuild_tree,
    stored_consistency_proof,
    tree_hashes,
)
from audit.store import AuditStore
from audit.store.chain import link_hash
from audit.store.models import StoredEvent

__all__ = [
    "CHECKPOINT_FORMAT",
    "EM_DASH",
    "LEAF_PAGE",
    "MAX_FILE",
    "MAX_NOTE",
    "ORIGIN_PREFIX",
    "RECEIPT_FORMAT",
    "Consistency",
    "ProvenEvent",
    "Receipt",
    "ReceiptError",
    "TreeCheckpoint",
    "checked_checkpoint",
    "dumps",
    "load_checkpoint",
    "load_receipt",
    "log_leaves",
    "make_receipt",
    "note_key_id",
    "open_note",
    "origin",
    "proven_events",
    "rebuild_tree",
    "request_events",
    "self_checked",
    "sign_checkpoint",
    "sign_note",
    "signed_head",
    "stored_consistency_proof",
    "tree_hashes",
    "verifier_key",
]


def signed_head(
    store: AuditStore,
    seed: bytes,
    proof_from: TreeCheckpoint | None = None,
    *,
    head: TreeHead | None = None,
) -> TreeCheckpoint:
    """Sign the tree head of the whole log as it is now (format 1: the stored tree's root at
    the log's head), or ``head`` (format 2: the tree head an integrator checkpoint signed,
    audit.sequenced.receipts, so no stored node decides the root). With ``proof_from`` (an
    earlier head signed by the same key), only if the stored tree proves the new head
    extends it; the consistency proof is then carried in the file for readers without the
    database."""
    if head is None:
        _refuse_format_2(store, "a tree head")
        size = store.head()[0]
        head = _head(store, size)
    size = head.size
    if proof_from is None:
        return sign_checkpoint(store.store_id, head, seed)
    public = public_raw_of(Ed25519PrivateKey.from_private_bytes(seed).public_key()).hex()
    try:
        old = checked_checkpoint(proof_from, [public])
    except ProofError as exc:
        raise ReceiptError(
            f"the earlier head does not check out under this checkpoint key: {exc}.",
            hint="Pass a tree-head file this log's GATEWAY_CHECKPOINT_KEY signed.",
        ) from None
    if proof_from.origin != origin(store.store_id) or old.size > size:
        raise ReceiptError(
            f"the earlier head is of {old.size} events of {proof_from.origin}: not an earlier "
            f"tree of this log, which holds {size} events.",
            hint="Pass an earlier `gateway audit tree-head` file of this log.",
        )
    proof = stored_consistency_proof(store, old.size, size)
    try:
        verify_consistency(old.size, size, proof, old.root, head.root)
    except ProofError as exc:
        raise ReceiptError(
            f"the log's tree of {size} events does not extend the earlier head of {old.size} "
            f"({exc}); nothing was signed.",
            hint="Write a head without --proof-from and run `gateway audit verify --from "
            "EARLIER --to NEW` (it recomputes both trees from the log); if only the stored "
            "tree is wrong, `tree-head --rebuild --proof-from EARLIER` then signs.",
        ) from None
    cp = sign_checkpoint(store.store_id, head, seed)
    carried = Consistency(from_size=old.size, proof=tuple(_b64(p) for p in proof))
    return cp.model_copy(update={"consistency": carried})


def _refuse_format_2(store: AuditStore, what: str) -> None:
    """A format-2 log's roots are the integrator's to sign: signing one read from the stored
    tree would let whoever can write ``merkle_nodes`` (the integrator role) choose it."""
    if store.sequenced_from is not None:
        raise ReceiptError(
            f"this log is in format 2: {what} is proven against the integrator's signed "
            "checkpoints, not signed from the stored tree.",
            hint="Use audit.sequenced.receipts (`gateway audit prove` and `tree-head` do).",
        )


def _head(store: AuditStore, size: int) -> TreeHead:
    _not_ahead(store, size)
    return TreeHead(size, tree_hashes(store, size, roots_at=(size,)).roots[size])


def _not_ahead(store: AuditStore, log_size: int) -> None:
    """The stored tree must not cover more leaves than the log (of ``log_size`` events)
    holds: nodes there are planted ahead of their leaves, or left from a log that was
    truncated (stale), and a root or proof read from them would not be this log's."""
    try:
        stored = MerkleState(store.backend).stored_size()
    except SQLAlchemyError:  # a role that may not read the table: proofs stream the log
        return
    if stored > log_size:
        raise ReceiptError(
            f"the stored Merkle tree covers {stored} leaves but the log holds {log_size} "
            "events: its nodes were planted ahead of the log, or the log was truncated; "
            "nothing is signed from it.",
            hint="Run `gateway audit verify`, then `gateway audit tree-head --rebuild` as the "
            "tables' owner.",
        )


def make_receipt(store: AuditStore, request_id: str, seed: bytes) -> Receipt:
    """Inclusion proofs of every event of ``request_id`` against a checkpoint of the whole
    log, signed now with the checkpoint key ``seed``: O(log n) reads of the stored tree.
    Format 1 only (format 2: audit.sequenced.receipts)."""
    _refuse_format_2(store, "a receipt")
    events = request_events(store, request_id)
    size = store.head()[0]
    _not_ahead(store, size)
    wanted = {r for e in events for r in inclusion_path(e.seq - 1, size)}
    found = tree_hashes(store, size, wanted, roots_at=(size,))  # one read: proofs and root
    checkpoint = sign_checkpoint(store.store_id, TreeHead(size, found.roots[size]), seed)
    proven = proven_events(store, events, checkpoint, [checkpoint.public_key], found)
    return self_checked(Receipt(request_id=request_id, checkpoint=checkpoint, events=proven))


def request_events(store: AuditStore, request_id: str) -> list[StoredEvent]:
    """The request's events, each hashing to its stored hash (nothing altered is proven)."""
    events = store.events_for_request(request_id)
    if not events:
        raise NotFound(f"there is no request {request_id!r} in the audit log.")
    for event in events:
        if link_hash(event.prev_hash, event.body) != event.hash:
            raise ReceiptError(
                f"event seq {event.seq} of the request does not hash to its stored hash: it "
                "was altered, and no receipt is signed for it.",
                hint="Run `gateway audit verify`.",
            )
    return events


def proven_events(
    store: AuditStore,
    events: list[StoredEvent],
    checkpoint: TreeCheckpoint,
    trusted: Iterable[str],
    found: Scan | None = None,
) -> tuple[ProvenEvent, ...]:
    """Each event with its inclusion proof from the stored tree (``found``: hashes already
    read, else read now), checked against the root ``checkpoint``'s note signs (under a
    ``trusted`` key): the stored tree is not trusted, so a planted, altered or stale node is
    refused here, never written into a receipt that fails its check later."""
    try:
        head = checked_checkpoint(checkpoint, trusted)
    except ProofError as exc:
        raise ReceiptError(f"the checkpoint to prove against does not check out: {exc}.") from None
    paths = {e.seq: inclusion_path(e.seq - 1, head.size) for e in events}
    if found is None or found.size != head.size:
        found = tree_hashes(store, head.size, {r for p in paths.values() for r in p})
    for event in events:
        try:
            proof = [found.hashes[r] for r in paths[event.seq]]
            verify_inclusion(event_leaf(event.hash), event.seq - 1, head.size, proof, head.root)
        except (ProofError, ValueError):
            raise ReceiptError(
                f"the stored Merkle tree gives event seq {event.seq} a proof that does not "
                f"lead to the signed root of the tree of {head.size} events: a stored node "
                "was altered or planted, and no receipt is written.",
                hint="Run `gateway audit tree-head --rebuild` as the tables' owner to "
                "recompute it from the log.",
            ) from None
    return tuple(
        ProvenEvent(
            seq=e.seq,
            kind=e.kind.value,
            prev_hash=e.prev_hash,
            hash=e.hash,
            body=e.body.decode("utf-8"),
            inclusion_proof=tuple(_b64(found.hashes[r]) for r in paths[e.seq]),
            signature=e.signature,
            key_id=e.key_id,
        )
        for e in events
    )


def self_checked(receipt: Receipt) -> Receipt:
    """``receipt``, once it passes the offline check a reader will run, with the key that
    signed it: a receipt that would be refused later is refused now."""
    report = check_receipt(dumps(receipt), [receipt.checkpoint.public_key])
    if not report.ok:
        raise ReceiptError(
            f"the receipt made for request {receipt.request_id!r} does not pass its own "
            f"check ({report.problems[0]}); nothing is written.",
            hint="Run `gateway audit verify`.",
        )
    return receipt
