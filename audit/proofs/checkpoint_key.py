"""The checkpoint key: an Ed25519 seed as 64 hex characters, and its public half.

    key = parse_key(os.environ["GATEWAY_CHECKPOINT_KEY"])   # CheckpointError if unusable
    public_key(key)                                          # what auditors are given (hex)

Apart from the checkpoint files (audit.proofs.checkpoint), so that naming the key (`gateway
keys list`, every public-key listing) does not import the Merkle tree and the receipt files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.errors import CheckpointError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["KEY_HINT", "parse_key", "private_key", "public_key"]

KEY_HINT = (
    "GATEWAY_CHECKPOINT_KEY must be 64 hex characters (32 random bytes); make one with "
    "`gateway keys new checkpoint --out FILE` and keep it secret."
)


def parse_key(text: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) != 32:
        raise CheckpointError("the checkpoint signing key is not usable.", hint=KEY_HINT)
    return key


def private_key(key: bytes) -> Ed25519PrivateKey:
    if len(key) != 32:
        raise CheckpointError("the checkpoint signing key is not 32 bytes.", hint=KEY_HINT)
    # Imported here, at the first use of a key: the auditing facade names this module, and
    # listing the log (`gateway audit list`) uses no key (audit.store.signing does the same).
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(key)


def public_key(key: bytes) -> str:
    return private_key(key).public_key().public_bytes_raw().hex()
