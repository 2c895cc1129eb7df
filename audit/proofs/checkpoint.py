"""Signed chain heads (checkpoints), Ed25519 through ``cryptography``.

    key = parse_key(os.environ["GATEWAY_CHECKPOINT_KEY"])        # 64 hex characters
    text = dumps(take_checkpoint(store, key))                     # what `audit checkpoint` writes
    cp = loads(text, trusted_public_key=public_key(key))          # what `audit verify` reads

Ed25519 rather than HMAC: whoever can check an HMAC can also forge one, so the auditor who
verifies would have to hold the very key the operator signs with. With Ed25519 the operator
keeps the private key and hands out the public key; a checkpoint proves who made it and a
verifier can never mint one. docs/audit.md says more.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from audit.canonical import canonical_bytes
from audit.errors import CheckpointError, LogFormatUnsupported
from audit.proofs.checkpoint_key import KEY_HINT, parse_key, public_key
from audit.proofs.checkpoint_key import private_key as _private
from audit.proofs.merkle import ProofError, TreeHead
from audit.proofs.receipt_files import (
    ORIGIN_PREFIX,
    TreeCheckpoint,
    checked_checkpoint,
    load_checkpoint,
    origin,
    sign_checkpoint,
)
from audit.proofs.tree import tree_hashes
from audit.store import AuditStore
from audit.store.models import (
    Checkpoint,
    EventDraft,
    EventKind,
    Relied,
    SignedBy,
    Verified,
    VerifyReport,
    format_time,
)
from audit.store.signing import TrustedKeys

__all__ = [
    "KEY_HINT",
    "b64",
    "dumps",
    "from_tree",
    "load_any",
    "loads",
    "parse_key",
    "pinned",
    "public_key",
    "relied_on",
    "sign",
    "signed_by",
    "take_checkpoint",
    "tree_root",
    "verified_checkpoint",
]


def sign(
    store_id: str,
    seq: int,
    head_hash: str,
    created_at: datetime,
    key: bytes | None,
    *,
    root: bytes | None = None,
    verified: Verified | None = None,
) -> Checkpoint:
    """The signed head. With ``root`` (the RFC 6962 root of events 1..seq) a version 2
    checkpoint, which also carries the head as a C2SP signed note by the same key, so any
    tlog-checkpoint verifier can check the tree head; with ``verified`` a verified one."""
    if verified is not None and (root is None or key is None):
        raise CheckpointError("a verified checkpoint is signed and carries the tree root.")
    tree: dict[str, Any] = {}
    if root is not None:
        tree = {"version": 2, "tree_size": seq, "root": b64(root)}
        if key is not None:
            tree["note"] = sign_checkpoint(store_id, TreeHead(seq, root), key).note
    unsigned = Checkpoint(
        store_id=store_id,
        seq=seq,
        hash=head_hash,
        created_at=created_at,
        public_key=public_key(key) if key is not None else None,
        signature=None,
        verified=verified,
        **tree,
    )
    if key is None:
        return unsigned
    signature = _private(key).sign(canonical_bytes(unsigned.signed_fields()))
    return unsigned.model_copy(update={"signature": signature.hex()})


def signed_by(checkpoint: Checkpoint) -> SignedBy:
    return SignedBy(
        seq=checkpoint.seq,
        hash=checkpoint.hash or "",
        public_key=checkpoint.public_key,
        created_at=format_time(checkpoint.created_at) if checkpoint.created_at else "",
    )


def b64(root: bytes) -> str:
    return base64.b64encode(root).decode("ascii")


def dumps(checkpoint: Checkpoint) -> str:
    # A version 1 file keeps its version 1 shape (older readers refuse unknown fields).
    v2 = {"tree_size", "root", "note", "verified"} if checkpoint.version < 2 else None
    return json.dumps(checkpoint.model_dump(mode="json", exclude=v2), indent=2) + "\n"


def load_any(text: str) -> Checkpoint:
    """Any checkpoint file, as a head to verify against: this module's (``audit
    checkpoint``, ``verify --write-verified``; :func:`loads`) or a tree checkpoint (``audit
    tree-head``, a receipt's, a witnessed one: :func:`from_tree`). Who signed it is
    :func:`pinned`'s to judge."""
    if '"format"' in text:
        return from_tree(load_checkpoint(text))
    return loads(text)


def loads(text: str, *, trusted_public_key: str | None = None) -> Checkpoint:
    """Parse and check a checkpoint's signature; refuse one signed by another key."""
    try:
        checkpoint = Checkpoint.model_validate_json(text)
    except ValidationError as exc:
        raise CheckpointError(
            "the checkpoint file is not a gateway checkpoint "
            f"({exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}).",
            hint="Pass the file written by `gateway audit checkpoint`.",
        ) from None
    if checkpoint.signature is None or checkpoint.public_key is None:
        if trusted_public_key is not None:
            raise CheckpointError(
                "the checkpoint is not signed, but a signing key is configured.",
                hint="Use a checkpoint written with GATEWAY_CHECKPOINT_KEY set.",
            )
        return checkpoint
    if trusted_public_key is not None and checkpoint.public_key != trusted_public_key:
        raise CheckpointError(
            "the checkpoint was signed with another key.",
            hint="Verify with the key that signed it (GATEWAY_CHECKPOINT_KEY or --public-key).",
        )
    try:
        pub = Ed25519PublicKey.from_public_bytes(bytes.fromhex(checkpoint.public_key))
        pub.verify(bytes.fromhex(checkpoint.signature), canonical_bytes(checkpoint.signed_fields()))
    except (ValueError, InvalidSignature):
        raise CheckpointError(
            "the checkpoint's signature does not match its contents: the file was altered.",
            hint="Use an unaltered copy of the checkpoint.",
        ) from None
    _check_tree(checkpoint)
    return checkpoint


def from_tree(tree: TreeCheckpoint) -> Checkpoint:
    """A tree checkpoint as a head to verify against: its note checked under the key the
    file names (whether that key is trusted is :func:`pinned`'s to say), its size as the
    seq, its root; no hash (the root fixes it) and no JSON signature (the note is it)."""
    if not tree.origin.startswith(ORIGIN_PREFIX):
        raise CheckpointError(
            f"the checkpoint's origin {tree.origin[:60]!r} is not a gateway audit log's.",
            hint="Pass a checkpoint written by this gateway.",
        )
    try:
        checked_checkpoint(tree, [tree.public_key])
    except (ProofError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint's signed note does not check out: {exc}.",
            hint="Use an unaltered copy of the checkpoint.",
        ) from None
    return Checkpoint(
        version=2,
        store_id=tree.origin.removeprefix(ORIGIN_PREFIX),
        seq=tree.tree_size,
        hash=None,
        created_at=None,
        public_key=tree.public_key,
        signature=None,
        tree_size=tree.tree_size,
        root=tree.root,
        note=tree.note,
    )


def _check_tree(checkpoint: Checkpoint) -> None:
    """A version 2 checkpoint's tree fields are whole and its note says what they say, under
    the key that signed the file (its JSON signature, checked already, covers the note)."""
    if checkpoint.version < 2:
        if checkpoint.root is not None or checkpoint.verified is not None:
            raise CheckpointError(
                "the checkpoint carries a tree root or a verification but is version 1, "
                "whose signature does not cover them: the file was altered.",
                hint="Use an unaltered copy of the checkpoint.",
            )
        return
    if checkpoint.root is None or checkpoint.tree_size != checkpoint.seq:
        raise CheckpointError(
            f"the version 2 checkpoint's tree size ({checkpoint.tree_size}) is not its seq "
            f"({checkpoint.seq}) or it has no root.",
            hint="Pass the file written by `gateway audit checkpoint` or `audit verify "
            "--write-verified`.",
        )
    if checkpoint.public_key is None or checkpoint.note is None:
        return  # an unsigned head: its root is a claim that verify recomputes, nothing more
    try:
        checked_checkpoint(
            TreeCheckpoint(
                origin=origin(checkpoint.store_id),
                tree_size=checkpoint.seq,
                root=checkpoint.root,
                public_key=checkpoint.public_key,
                note=checkpoint.note,
            ),
            [checkpoint.public_key],
        )
    except (ProofError, ValueError) as exc:
        raise CheckpointError(
            f"the checkpoint's signed note does not check out: {exc}.",
            hint="Use an unaltered copy of the checkpoint.",
        ) from None


def pinned(
    checkpoint: Checkpoint, trusted: Collection[str], *, unsafe_accept_unpinned: bool = False
) -> bool:
    """Whether the checkpoint's signer is one of ``trusted`` (hex public keys).

    :func:`loads` proves only that the file is unaltered since *someone* signed it, with the
    key the file itself names; a checkpoint is evidence only when that key is one the verifier
    trusts. An unpinned checkpoint (another key, or none) is refused with
    :class:`CheckpointError`, unless ``unsafe_accept_unpinned`` - then this returns False and
    the caller must say so.
    """
    signer = checkpoint.public_key
    if signer is not None and signer in trusted:
        return True
    if unsafe_accept_unpinned:
        return False
    if signer is None:
        raise CheckpointError(
            "the checkpoint is not signed, so no trusted key vouches for it.",
            hint="Verify against a checkpoint signed with GATEWAY_CHECKPOINT_KEY "
            "(or pass --unsafe-accept-unpinned-checkpoint to accept it anyway).",
        )
    raise CheckpointError(
        f"the checkpoint was signed with another key ({signer[:16]}...), not one this verify "
        "trusts.",
        hint="Pass the signer's public key with --public-key FILE (or set "
        "GATEWAY_CHECKPOINT_KEY) if you trust it; --unsafe-accept-unpinned-checkpoint accepts "
        "it anyway.",
    )


def relied_on(checkpoint: Checkpoint, keys: TrustedKeys, pins: Collection[str]) -> Relied:
    """What a verify may rely on from a verified checkpoint signed by a key of ``pins`` (never
    accepted unpinned): the record signatures of events 1..seq by keys that its verify
    trusted and ``keys`` still trust, with the same public key. A head that was
    not verified (``audit checkpoint``'s) is refused: its signer vouched for a head, not for
    the signatures under it."""
    if checkpoint.public_key is None or checkpoint.public_key not in pins:
        signer = checkpoint.public_key[:16] + "..." if checkpoint.public_key else "nobody"
        raise CheckpointError(
            f"the verified checkpoint is signed by {signer}, not a key this verify trusts: "
            "the signatures it attests cannot be skipped on its word.",
            hint="Set GATEWAY_CHECKPOINT_KEY or pass --public-key FILE of the key that wrote "
            "it if you trust it, or verify without --since-verified.",
        )
    verified = checkpoint.verified
    if verified is None or checkpoint.root is None or checkpoint.hash is None:
        raise CheckpointError(
            "the checkpoint is a signed head, not a verified checkpoint: nobody attested that "
            "the record signatures under it were checked.",
            hint="Pass a file written by `gateway audit verify --write-verified FILE`, or "
            "verify without --since-verified.",
        )
    attested = {k.key_id: k.public_key for k in verified.trusted_keys}
    still = frozenset(k.key_id for k in keys if attested.get(k.key_id) == k.public_key)
    return Relied(checkpoint.seq, checkpoint.hash, still, verified.signatures_digest)


def take_checkpoint(store: AuditStore, key: bytes | None) -> Checkpoint:
    """Record a CHECKPOINT event, then sign the head that event created.

    A format-2 log is refused: a format-2 event's hash is its body's, not a link, and the
    head to sign is the integrator's newest checkpoint
    (:func:`audit.sequenced.integrated_checkpoint`)."""
    if store.sequenced_from is not None:
        raise LogFormatUnsupported(
            "this log is in format 2: its head is the integrator's newest checkpoint.",
            hint="Take it with audit.sequenced.integrated_checkpoint (the integrator's keys).",
        )
    public = public_key(key) if key is not None else None  # a bad key writes nothing
    appended = store.append(
        EventDraft(
            kind=EventKind.CHECKPOINT,
            request_id=f"checkpoint-{uuid.uuid4().hex}",
            data={"signed": key is not None, "public_key": public},
        )
    )
    root = tree_root(store, appended.seq)
    return sign(store.store_id, appended.seq, appended.hash, appended.recorded_at, key, root=root)


def tree_root(store: AuditStore, size: int) -> bytes:
    """The RFC 6962 root of events 1..``size``, from the stored tree (audit.proofs.tree:
    O(log n) reads once extended; a verify against the checkpoint recomputes it)."""
    return tree_hashes(store, size, roots_at=(size,)).roots[size]


def verified_checkpoint(
    store: AuditStore, report: VerifyReport, key: bytes, rests_on: Checkpoint | None = None
) -> Checkpoint:
    """Sign, with the checkpoint key, that ``report`` (a :func:`audit.verify.verify_log` with
    ``measure_head``, relying on ``rests_on`` if given) found this log intact through its
    head. Refused for a report with defects or one that checked no signatures."""
    if not report.ok or not report.signatures_checked:
        raise CheckpointError(
            "only a verify that found no defect and checked every record signature can "
            "be written as a verified checkpoint.",
            hint="Fix the defects (or give the trusted keys), then verify again.",
        )
    if report.head_root is None or report.head_signatures_digest is None:
        raise CheckpointError("the verify did not measure its head (measure_head).")
    verified = Verified(
        trusted_keys=report.trusted_keys,
        allow_unsigned_before=report.unsigned_allowed_before,
        signatures_digest=report.head_signatures_digest,
        rests_on=signed_by(rests_on) if rests_on is not None else None,
    )
    return sign(
        store.store_id,
        report.head_seq,
        report.head_hash,
        datetime.now(UTC),
        key,
        root=base64.b64decode(report.head_root),
        verified=verified,
    )
