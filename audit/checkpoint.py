"""Signed chain heads (checkpoints), Ed25519 through ``cryptography``.

    key = parse_key(os.environ["GATEWAY_CHECKPOINT_KEY"])        # 64 hex characters
    text = dumps(sign(store_id, seq, hash, created_at, key))      # what `audit checkpoint` writes
    cp = loads(text, trusted_public_key=public_key(key))          # what `audit verify` reads

Ed25519 rather than HMAC: whoever can check an HMAC can also forge one, so the auditor who
verifies would have to hold the very key the operator signs with. With Ed25519 the operator
keeps the private key and hands out the public key; a checkpoint proves who made it and a
verifier can never mint one. docs/audit.md says more.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import ValidationError

from audit.canonical import canonical_bytes
from audit.errors import CheckpointError
from audit.models import Checkpoint

KEY_HINT = (
    "GATEWAY_CHECKPOINT_KEY must be 64 hex characters (32 random bytes); make one with "
    "`python -c 'import secrets; print(secrets.token_hex(32))'` and keep it secret."
)


def parse_key(text: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) != 32:
        raise CheckpointError("the checkpoint signing key is not usable.", hint=KEY_HINT)
    return key


def _private(key: bytes) -> Ed25519PrivateKey:
    if len(key) != 32:
        raise CheckpointError("the checkpoint signing key is not 32 bytes.", hint=KEY_HINT)
    return Ed25519PrivateKey.from_private_bytes(key)


def public_key(key: bytes) -> str:
    raw = _private(key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return raw.hex()


def sign(
    store_id: str, seq: int, head_hash: str, created_at: datetime, key: bytes | None
) -> Checkpoint:
    unsigned = Checkpoint(
        store_id=store_id,
        seq=seq,
        hash=head_hash,
        created_at=created_at,
        public_key=public_key(key) if key is not None else None,
        signature=None,
    )
    if key is None:
        return unsigned
    signature = _private(key).sign(canonical_bytes(unsigned.signed_fields()))
    return unsigned.model_copy(update={"signature": signature.hex()})


def dumps(checkpoint: Checkpoint) -> str:
    return json.dumps(checkpoint.model_dump(mode="json"), indent=2) + "\n"


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
    return checkpoint


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
