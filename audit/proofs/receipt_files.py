"""The receipt and tree-checkpoint files: their shapes, signing a head, reading them back.

    cp = sign_checkpoint(store_id, TreeHead(size, root), seed)    # a C2SP signed note
    head = checked_checkpoint(cp, [public_key_hex])                # what the note signs
    receipt = load_receipt(text)                                   # a file, parsed and bounded

No database here: audit.proofs.receipts makes receipts and heads from a log,
audit.proofs.receipt_checks checks them offline; both read and write these shapes.
``public_key`` in a file must be the key that signed its note, and the fields beside the note
must say what the note says.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import Any, Final, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.errors import CheckpointError
from audit.proofs.merkle import ProofError, TreeHead
from audit.proofs.signed_note import open_note, public_raw_of, sign_note
from audit.proofs.timestamp import TimeStamp
from audit.store.bounded import UnreadableJSON
from audit.store.bounded import loads as bounded_loads
from audit.store.signing import TrustedKeys, UnusableKey

CHECKPOINT_FORMAT: Final = "compliance-gateway tree checkpoint v1"
RECEIPT_FORMAT: Final = "compliance-gateway receipt v1"
ORIGIN_PREFIX = "compliance-gateway.audit/"
MAX_FILE = 64 * 1024 * 1024  # a receipt of a request with very many events


class ReceiptError(CheckpointError):
    """A receipt or tree checkpoint that cannot be read or made (not one that fails its
    check: that is a report with reasons)."""


class _Frozen(BaseModel):  # also audit.proofs.receipt_checks' reports
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
    # RFC 3161 tokens over the note's text (audit.proofs.timestamp); left out of the file when none
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
    # The writing gateway's record signature of ``hash`` and its key id (audit.store.signing):
    # a reader holding the trusted record public key checks who wrote the event, offline.
    signature: str | None = None
    key_id: str | None = None


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
    if "format" not in value and "store_id" in value:
        return _of_chain_head(value)
    try:
        return TreeCheckpoint.model_validate(value)
    except ValidationError as exc:
        raise ReceiptError(
            f"the file is not a gateway tree checkpoint ({exc.errors()[0]['msg']}).",
            hint="Pass a file written by `gateway audit tree-head` or `gateway audit prove`.",
        ) from None


def _of_chain_head(value: dict[str, Any]) -> TreeCheckpoint:
    """An ``audit checkpoint`` file (version 2) read as the tree checkpoint its note is: the
    note is the signed tree head; the fields beside it must say what it says, which
    :func:`checked_checkpoint` checks. A version 1 file carries no note."""
    note, size, store = value.get("note"), value.get("tree_size"), value.get("store_id")
    if not isinstance(note, str) or not isinstance(store, str):
        raise ReceiptError(
            "the checkpoint is a version 1 `audit checkpoint` file: it signs a chain head, "
            "not a tree head, so it can serve `audit verify --checkpoint` only.",
            hint="Take a new one with `gateway audit checkpoint` (version 2 carries the tree "
            "head) or `gateway audit tree-head`.",
        )
    if value.get("seq") != size:
        raise ReceiptError("the checkpoint's seq is not its tree size: the file was altered.")
    try:
        return TreeCheckpoint(
            origin=origin(store),
            tree_size=size,
            root=value.get("root"),
            public_key=value.get("public_key"),
            note=note,
        )
    except ValidationError as exc:
        raise ReceiptError(
            f"the file is not a gateway checkpoint ({exc.errors()[0]['msg']}).",
            hint="Pass a file written by `gateway audit checkpoint` or `gateway audit tree-head`.",
        ) from None


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""
