"""Receipts: a request's events proven into a signed Merkle tree head, checked offline.

    receipt = make_receipt(store, "req-1", key)              # key: the checkpoint key's seed
    text = dumps(receipt)                                    # what `audit prove -o` writes
    head = signed_head(store, key)                           # what `audit tree-head` writes
    # checking them: audit.receipt_checks (check_receipt, check_consistency)

**The tree** is audit.merkle's over the log: leaf ``seq - 1`` is the raw bytes of event
``seq``'s hash. Its complete subtrees are stored (audit._merkle_store, table
``merkle_nodes``), derived from the log and extended from the highest stored leaf before each
proof, so a proof or a tree head costs O(log n) reads once the table has caught up (the
events appended since the last proof are hashed once). The stored rows are not trusted:
every inclusion proof a receipt carries is checked against the root before it is signed.
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
``prev_hash``, ``hash``, body (the hashed bytes as text) and inclusion proof. The check
(audit.receipt_checks) recomputes each hash from ``prev_hash`` and the body, the leaf from
the hash, the root from the proof, and compares it with the signed root: an altered body,
proof node, root, size or signature is refused with the reason. A receipt proves that these
events are in the log the key holder signed; it does not prove that the request has no
other event.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import Any, Final, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit._bounded import UnreadableJSON
from audit._bounded import loads as bounded_loads
from audit._log_tree import (
    LEAF_PAGE,
    log_leaves,
    rebuild_tree,
    stored_consistency_proof,
    tree_hashes,
)
from audit.chain import link_hash
from audit.errors import CheckpointError, NotFound
from audit.merkle import (
    ProofError,
    TreeHead,
    event_leaf,
    inclusion_path,
    verify_consistency,
    verify_inclusion,
)
from audit.signed_note import (
    EM_DASH,
    MAX_NOTE,
    note_key_id,
    open_note,
    public_raw_of,
    sign_note,
    verifier_key,
)
from audit.signing import TrustedKeys, UnusableKey
from audit.store import AuditStore
from audit.timestamp import TimeStamp

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
    "rebuild_tree",
    "sign_checkpoint",
    "sign_note",
    "signed_head",
    "stored_consistency_proof",
    "tree_hashes",
    "verifier_key",
]

CHECKPOINT_FORMAT: Final = "compliance-gateway tree checkpoint v1"
RECEIPT_FORMAT: Final = "compliance-gateway receipt v1"
ORIGIN_PREFIX = "compliance-gateway.audit/"
MAX_FILE = 64 * 1024 * 1024  # a receipt of a request with very many events


class ReceiptError(CheckpointError):
    """A receipt or tree checkpoint that cannot be read or made (not one that fails its
    check: that is a report with reasons)."""


class _Frozen(BaseModel):  # also audit.receipt_checks' reports
    model_config = ConfigDict(frozen=True, extra="forbid")


def origin(store_id: str) -> str:
    return ORIGIN_PREFIX + store_id


# -- tree checkpoints --------------------------------------------------------------------------


class Consistency(_Frozen):
    from_size: int = Field(ge=0)
    proof: tuple[str, ...]  # base64 hashes, RFC 9162 §2.1.4 order

    def hashes(self) -> list[bytes]:
        return [_unb64(p) for p in self.proof]


class TreeCheckpoint(_Frozen):
    """A signed tree head: the note is the evidence; the other fields repeat what it says."""

    format: Literal["compliance-gateway tree checkpoint v1"] = (
        "compliance-gateway tree checkpoint v1"
    )
    origin: str
    tree_size: int = Field(ge=0)
    root: str  # base64, as in the note
    public_key: str  # hex of the raw Ed25519 key that signed it (which the reader must trust)
    note: str
    # RFC 3161 tokens over the note's text (audit.timestamp); left out of the file when none
    timestamps: tuple[TimeStamp, ...] = ()
    # The proof that this tree extends an earlier one (signed_head's proof_from), so that a
    # witness without the database can check it; checked against the two roots, not trusted.
    consistency: Consistency | None = None

    @property
    def head(self) -> TreeHead:
        return TreeHead(self.tree_size, base64.b64decode(self.root))


def sign_checkpoint(store_id: str, head: TreeHead, seed: bytes) -> TreeCheckpoint:
    name = origin(store_id)
    root = base64.b64encode(head.root).decode("ascii")
    public = public_raw_of(Ed25519PrivateKey.from_private_bytes(seed).public_key())
    return TreeCheckpoint(
        origin=name,
        tree_size=head.size,
        root=root,
        public_key=public.hex(),
        note=sign_note(f"{name}\n{head.size}\n{root}\n", name, seed),
    )


def _raw_keys(public_keys: Iterable[str]) -> list[bytes]:
    try:
        return [bytes.fromhex(key.public_key) for key in TrustedKeys.of(public_keys)]
    except UnusableKey as exc:
        raise ReceiptError(f"a trusted public key is not usable: {exc}") from None


def checked_checkpoint(cp: TreeCheckpoint, trusted: Iterable[str]) -> TreeHead:
    """The tree head ``cp`` signs, once its note verifies under a ``trusted`` key (hex) that is
    the file's ``public_key``, and says what the file's fields say; :class:`ProofError`
    otherwise."""
    text, signer = open_note(cp.note, cp.origin, _raw_keys(trusted))
    if signer.hex() != cp.public_key.lower():
        # Reports name the file's public_key as the signer: it must be the key that signed.
        raise ProofError(
            f"the file's public_key {cp.public_key[:16]}… is not the key that signed its note "
            f"({signer.hex()[:16]}…): the file was altered"
        )
    lines = text[:-1].split("\n")
    if len(lines) < 3 or lines[0] != cp.origin:
        raise ProofError("the checkpoint note is not a tree checkpoint of this origin")
    size_text, root_text = lines[1], lines[2]
    # ASCII digits only: isdigit() also takes "²" (int() then raises) and other scripts' digits.
    plain = size_text.isascii() and size_text.isdigit()
    if not plain or (size_text != "0" and size_text.startswith("0")):
        raise ProofError(f"the checkpoint's tree size {size_text[:40]!r} is not a number")
    try:
        root = base64.b64decode(root_text, validate=True)
    except (binascii.Error, ValueError):
        root = b""
    if len(root) != 32:
        raise ProofError("the checkpoint's root is not a base64 SHA-256 hash")
    if int(size_text) != cp.tree_size or root_text != cp.root:
        raise ProofError(
            "the file's tree_size or root differs from its signed note: the file was altered"
        )
    return TreeHead(cp.tree_size, root)


# -- receipts ----------------------------------------------------------------------------------


class ProvenEvent(_Frozen):
    seq: int = Field(ge=1)
    kind: str
    prev_hash: str
    hash: str
    body: str  # the hashed bytes as UTF-8 text
    inclusion_proof: tuple[str, ...]  # base64 hashes, leaf to root


class Receipt(_Frozen):
    format: Literal["compliance-gateway receipt v1"] = RECEIPT_FORMAT
    request_id: str
    checkpoint: TreeCheckpoint
    events: tuple[ProvenEvent, ...]


def dumps(value: Receipt | TreeCheckpoint) -> str:
    data = value.model_dump(mode="json")
    cp = data["checkpoint"] if isinstance(value, Receipt) else data
    for optional in ("timestamps", "consistency"):  # absent: the shape older readers accept
        if not cp[optional]:
            del cp[optional]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _load(text: str, what: str) -> dict[str, Any]:
    if len(text) > MAX_FILE:
        raise ReceiptError(f"the {what} is over {MAX_FILE // 2**20} MB.")
    try:
        value = bounded_loads(text.encode("utf-8"))
    except (UnreadableJSON, ValueError) as exc:
        raise ReceiptError(f"the {what} is not JSON ({exc}).") from None
    if not isinstance(value, dict):
        raise ReceiptError(f"the {what} is not a JSON object.")
    return value


def load_receipt(text: str) -> Receipt:
    try:
        return Receipt.model_validate(_load(text, "receipt"))
    except ValidationError as exc:
        raise ReceiptError(
            f"the file is not a gateway receipt ({exc.error_count()} problem(s), first: "
            f"{exc.errors()[0]['msg']} at {'.'.join(map(str, exc.errors()[0]['loc']))}).",
            hint="Pass the file written by `gateway audit prove`.",
        ) from None


def load_checkpoint(text: str) -> TreeCheckpoint:
    """A tree checkpoint file, or the checkpoint inside a receipt."""
    value = _load(text, "checkpoint")
    if value.get("format") == RECEIPT_FORMAT:
        return load_receipt(text).checkpoint
    try:
        return TreeCheckpoint.model_validate(value)
    except ValidationError as exc:
        raise ReceiptError(
            f"the file is not a gateway tree checkpoint ({exc.errors()[0]['msg']}).",
            hint="Pass a file written by `gateway audit tree-head` or `gateway audit prove`.",
        ) from None


def signed_head(
    store: AuditStore, seed: bytes, proof_from: TreeCheckpoint | None = None
) -> TreeCheckpoint:
    """Sign the tree head of the whole log as it is now. With ``proof_from`` (an earlier
    head signed by the same key), only if the stored tree proves the new head extends it;
    the consistency proof is then carried in the file for readers without the database."""
    size = store.head()[0]
    head = _head(store, size)
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


def _head(store: AuditStore, size: int) -> TreeHead:
    return TreeHead(size, tree_hashes(store, size, roots_at=(size,)).roots[size])


def make_receipt(store: AuditStore, request_id: str, seed: bytes) -> Receipt:
    """Inclusion proofs of every event of ``request_id`` against a checkpoint of the whole
    log, signed now with the checkpoint key ``seed``: O(log n) reads of the stored tree."""
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
    size = store.head()[0]
    paths = {e.seq: inclusion_path(e.seq - 1, size) for e in events}
    found = tree_hashes(store, size, {r for p in paths.values() for r in p}, roots_at=(size,))
    root = found.roots[size]
    for event in events:  # the stored tree is not trusted: nothing unproven is signed
        try:
            proof = [found.hashes[r] for r in paths[event.seq]]
            verify_inclusion(event_leaf(event.hash), event.seq - 1, size, proof, root)
        except (ProofError, ValueError):
            raise ReceiptError(
                f"the stored Merkle tree gives event seq {event.seq} a proof that does not "
                f"lead to the root of the tree of {size} events: a stored node was altered, "
                "and no receipt is signed.",
                hint="Run `gateway audit tree-head --rebuild` to recompute it from the log.",
            ) from None
    checkpoint = sign_checkpoint(store.store_id, TreeHead(size, root), seed)
    proven = tuple(
        ProvenEvent(
            seq=e.seq,
            kind=e.kind.value,
            prev_hash=e.prev_hash,
            hash=e.hash,
            body=e.body.decode("utf-8"),
            inclusion_proof=tuple(_b64(found.hashes[r]) for r in paths[e.seq]),
        )
        for e in events
    )
    return Receipt(request_id=request_id, checkpoint=checkpoint, events=proven)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""
