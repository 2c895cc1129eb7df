"""C2SP signed notes with Ed25519 (https://c2sp.org/signed-note): sign one, open one.

    note = sign_note("origin\n12\n<base64 root>\n", "origin", seed)
    text, signer = open_note(note, "origin", [public_raw])       # ProofError if not

A note is its text, a blank line, and signature lines ``— <key name> base64(key ID ||
signature)``; the Ed25519 key ID is SHA-256(name || 0x0A || 0x01 || public key)[:4], so any
C2SP verifier (Go's golang.org/x/mod/sumdb/note) given the key checks it. A reader ignores
lines by keys it does not know (witness cosignatures, audit.proofs.cosignature, among them).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from audit.proofs.merkle import ProofError

ED25519 = b"\x01"  # the signed-note signature type of Ed25519
EM_DASH = "\u2014"
MAX_NOTE = 64 * 1024
MAX_SIGNATURES = 100


def public_raw_of(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def typed_key_id(name: str, key_type: bytes, public_raw: bytes) -> bytes:
    """The 4-byte ID of a signed-note key of ``key_type`` (0x01 a note signer, 0x04 a
    cosigner): SHA-256(name || 0x0A || type || key)[:4]."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + key_type + public_raw).digest()[:4]


def typed_vkey(name: str, key_type: bytes, public_raw: bytes) -> str:
    """The key as Go's sumdb/note and C2SP tools name it: ``name+keyid+base64(type||key)``."""
    b64 = base64.b64encode(key_type + public_raw).decode("ascii")
    return f"{name}+{typed_key_id(name, key_type, public_raw).hex()}+{b64}"


def note_key_id(name: str, public_raw: bytes) -> bytes:
    """The key ID of an Ed25519 note key (type 0x01)."""
    return typed_key_id(name, ED25519, public_raw)


def verifier_key(name: str, public_raw: bytes) -> str:
    """An Ed25519 note key as C2SP tools name it (type 0x01)."""
    return typed_vkey(name, ED25519, public_raw)


def sign_note(text: str, name: str, seed: bytes) -> str:
    """The signed note of ``text`` (ending in a newline) by the Ed25519 key of ``seed``."""
    if not text.endswith("\n") or "\n\n" in text or any(c < " " and c != "\n" for c in text):
        raise ValueError("a note's text ends in one newline and has no blank line or control")
    if not name or "+" in name or any(c.isspace() for c in name):
        raise ValueError(f"{name!r} cannot name a note key")
    private = Ed25519PrivateKey.from_private_bytes(seed)
    signature = private.sign(text.encode("utf-8"))
    key_id = note_key_id(name, public_raw_of(private.public_key()))
    line = f"{EM_DASH} {name} {base64.b64encode(key_id + signature).decode('ascii')}\n"
    return f"{text}\n{line}"


def open_note(note: str, name: str, trusted: Iterable[bytes]) -> tuple[str, bytes]:
    """The text of ``note`` and the raw public key that signed it, once a signature by one
    of ``trusted`` (raw Ed25519 public keys) under key name ``name`` checks out; else
    :class:`ProofError` saying why. Signatures by other keys are ignored, as C2SP says."""
    if len(note) > MAX_NOTE:
        raise ProofError(f"the checkpoint note is over {MAX_NOTE} characters")
    if any(c < " " and c != "\n" for c in note):
        raise ProofError("the checkpoint note holds a control character")
    cut = note.rfind("\n\n")
    if cut < 0 or not note.endswith("\n"):
        raise ProofError("the checkpoint is not a signed note (no blank line before signatures)")
    text, lines = note[: cut + 1], note[cut + 2 : -1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise ProofError(f"the checkpoint note has over {MAX_SIGNATURES} signatures")
    keys = {note_key_id(name, raw): raw for raw in trusted}
    for line in lines:
        dash, _, rest = line.partition(" ")
        signer, _, b64 = rest.partition(" ")
        try:
            blob = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            blob = b""
        if dash != EM_DASH or not signer or len(blob) < 5 or " " in b64:
            raise ProofError(f"the checkpoint note's signature line {line[:60]!r} is malformed")
        raw = keys.get(blob[:4]) if signer == name else None
        if raw is None:
            continue  # another key's: C2SP verifiers ignore signatures from unknown keys
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(blob[4:], text.encode("utf-8"))
        except InvalidSignature:
            raise ProofError(
                "the checkpoint's signature does not match its text: the tree size, the root "
                "or the signature was altered"
            ) from None
        return text, raw
    raise ProofError(
        "the checkpoint is signed by no trusted key (pass the public key of the "
        "GATEWAY_CHECKPOINT_KEY that signed it)"
    )
