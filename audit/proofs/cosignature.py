"""C2SP tlog-cosignature v1 (Ed25519) lines on a signed note: add one, check them.

    note = add_cosignature(checkpoint.note, "witness.example/w1", seed, int(time.time()))
    checks = check_cosignatures(note, [Witness.parse("witness.example/w1=<64 hex>")])

A cosignature is one more signed-note line,
``— <witness name> base64(key ID || u64 big-endian time || Ed25519 signature)``, with key
ID = SHA-256(name || 0x0A || 0x04 || public key)[:4], over the message
``cosignature/v1\ntime <time>\n`` followed by the note's text (https://c2sp.org/tlog-cosignature).
A reader is configured with (name, public key) pairs and ignores every other line, as the
spec says. What a witness decides before it cosigns is audit.proofs.witness's.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterable
from typing import Final, NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict

from audit.errors import CheckpointError
from audit.proofs.signed_note import EM_DASH, MAX_NOTE, public_raw_of, typed_key_id, typed_vkey

COSIGNATURE_V1: Final = b"\x04"  # the signed-note signature type of an Ed25519 cosignature


class WitnessError(CheckpointError):
    """A witness key, name or state file that cannot be used."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- keys and lines ----------------------------------------------------------------------------


def public_of(seed: bytes) -> bytes:
    return public_raw_of(Ed25519PrivateKey.from_private_bytes(seed).public_key())


def cosigner_key_id(name: str, public_raw: bytes) -> bytes:
    return typed_key_id(name, COSIGNATURE_V1, public_raw)


def cosigner_vkey(name: str, public_raw: bytes) -> str:
    """The witness key as C2SP tools write it: ``name+keyid+base64(0x04 || key)``."""
    return typed_vkey(name, COSIGNATURE_V1, public_raw)


def signed_message(text: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def check_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() or c < " " for c in name) or len(name) > 200:
        raise WitnessError(
            f"{name[:80]!r} cannot name a witness: no spaces, no '+', at most 200 characters.",
            hint="Use a schema-less URL that identifies the witness, e.g. witness.bank.example/w1.",
        )


def add_cosignature(note: str, name: str, seed: bytes, timestamp: int) -> str:
    """``note`` with this witness's cosignature line at ``timestamp`` (POSIX seconds),
    replacing an earlier cosignature by the same witness key."""
    check_name(name)
    if not 0 <= timestamp < 2**63:
        raise WitnessError(f"{timestamp} is not a POSIX time a cosignature can carry.")
    cut = note.rfind("\n\n")
    text, lines = note[: cut + 1], note[cut + 2 : -1].split("\n")
    key_id = cosigner_key_id(name, public_of(seed))
    prefix = f"{EM_DASH} {name} "
    kept = [line for line in lines if not _is_line_of(line, prefix, key_id)]
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(signed_message(text, timestamp))
    blob = key_id + struct.pack(">Q", timestamp) + signature
    kept.append(prefix + base64.b64encode(blob).decode("ascii"))
    return text + "\n" + "".join(line + "\n" for line in kept)


def _blob(line: str, prefix: str) -> bytes:
    if not line.startswith(prefix):
        return b""
    try:
        return base64.b64decode(line[len(prefix) :], validate=True)
    except (binascii.Error, ValueError):
        return b""


def _is_line_of(line: str, prefix: str, key_id: bytes) -> bool:
    return _blob(line, prefix)[:4] == key_id


# -- checking cosignatures ---------------------------------------------------------------------


class Witness(NamedTuple):
    """A witness a reader trusts: its name and raw Ed25519 public key."""

    name: str
    public_raw: bytes

    @classmethod
    def parse(cls, spec: str) -> Witness:
        """``NAME=KEY`` (KEY: 64 hex characters or base64 of the raw key) or a C2SP vkey
        ``NAME+KEYID+base64(0x04 || key)``."""
        name, eq, key = spec.partition("=")
        if not eq:
            return cls(*_from_vkey(spec))
        check_name(name)
        raw = _raw_public(key.strip())
        if raw is None:
            raise WitnessError(
                f"the witness key of {name!r} is not a 32-byte Ed25519 public key.",
                hint="Pass --witness-key NAME=KEY with 64 hex characters (what `gateway audit "
                "witness` prints), or the vkey NAME+KEYID+BASE64.",
            )
        return cls(name, raw)


def _raw_public(text: str) -> bytes | None:
    try:
        raw = bytes.fromhex(text) if len(text) == 64 else base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def _from_vkey(spec: str) -> tuple[str, bytes]:
    parts = spec.split("+")
    bad = WitnessError(
        f"{spec[:80]!r} is neither NAME=KEY nor a witness vkey NAME+KEYID+BASE64.",
        hint="Pass --witness-key NAME=KEY (64 hex characters).",
    )
    if len(parts) != 3:
        raise bad
    name, key_id, b64 = parts
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise bad from None
    if len(blob) != 33 or blob[:1] != COSIGNATURE_V1:
        raise bad
    check_name(name)
    if cosigner_key_id(name, blob[1:]).hex() != key_id:
        raise WitnessError(f"the vkey of witness {name!r} has a key ID that is not its key's.")
    return name, blob[1:]


class WitnessCheck(_Frozen):
    name: str
    public_key: str  # hex
    ok: bool
    cosigned_at: int | None  # POSIX seconds the witness put in its cosignature
    problem: str | None


def check_cosignatures(note: str, witnesses: Iterable[Witness]) -> list[WitnessCheck]:
    """For each witness, whether ``note`` carries its valid cosignature (and when)."""
    cut = note.rfind("\n\n")
    text, lines = note[: cut + 1], note[cut + 2 : -1].split("\n")
    if cut < 0 or len(note) > MAX_NOTE:
        lines = []
    checks = []
    for witness in witnesses:
        key_id = cosigner_key_id(witness.name, witness.public_raw)
        prefix = f"{EM_DASH} {witness.name} "
        blobs = [b for b in (_blob(line, prefix) for line in lines) if b[:4] == key_id]
        checks.append(_check_one(witness, text, blobs))
    return checks


def timestamp_of(blob: bytes) -> int:
    """The POSIX time in a decoded cosignature (key ID, u64 big-endian time, signature)."""
    (at,) = struct.unpack(">Q", blob[4:12])
    return int(at)


def _check_one(witness: Witness, text: str, blobs: list[bytes]) -> WitnessCheck:
    def result(problem: str | None, at: int | None = None) -> WitnessCheck:
        return WitnessCheck(
            name=witness.name,
            public_key=witness.public_raw.hex(),
            ok=problem is None,
            cosigned_at=at,
            problem=problem,
        )

    if not blobs:
        return result(f"no cosignature by witness {witness.name} with the trusted key")
    # Any line that verifies counts: a junk line under the same name and key id, placed
    # first, must not hide a good cosignature.
    public = Ed25519PublicKey.from_public_bytes(witness.public_raw)
    for blob in blobs:
        if len(blob) != 4 + 8 + 64:
            continue
        at = timestamp_of(blob)
        try:
            public.verify(blob[12:], signed_message(text, at))
        except InvalidSignature:
            continue
        return result(None, at)
    if all(len(blob) != 4 + 8 + 64 for blob in blobs):
        return result(f"the cosignature by witness {witness.name} is malformed")
    return result(
        f"the cosignature by witness {witness.name} does not match the checkpoint: the "
        "tree size, the root, its time or the cosignature was altered"
    )
