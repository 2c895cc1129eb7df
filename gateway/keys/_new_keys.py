"""New Ed25519 keys, written to a file (mode 0600) with their public half beside them.

    made = new_key_file(KeyKind.RECORD, Path("keys/record.key"))
    made.public_key        # 64 hex characters; also in keys/record.key.pub

Every key the gateway signs with is the same shape: a 32-byte Ed25519 seed as 64 hex
characters and a newline, the format ``GATEWAY_RECORD_KEY_FILE``, ``--key FILE`` and
``$(cat FILE)`` all read. What differs per kind is where the key and its public half go,
which :data:`KEY_USES` says in one line each (printed by `gateway keys new`).
"""

from __future__ import annotations

import os
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from audit.store.signing import Signer, create_key_file
from gateway.errors import InputError

__all__ = ["KEY_USES", "KeyKind", "NewKey", "new_key_file", "new_key_hint"]


class KeyKind(StrEnum):
    RECORD = "record"  # signs every audit event a gateway writes
    CHECKPOINT = "checkpoint"  # signs checkpoints and receipts
    INTEGRATOR = "integrator"  # format 2: signs the integrator's checkpoints and voids
    WITNESS = "witness"  # cosigns another party's checkpoints
    APPROVER = "approver"  # one person's policy approvals


class KeyUse(NamedTuple):
    private: str  # where the private key goes
    public: str  # who is given the public half, and how they name it


KEY_USES: dict[KeyKind, KeyUse] = {
    KeyKind.RECORD: KeyUse(
        "GATEWAY_RECORD_KEY_FILE={key} on every gateway instance that writes with it",
        "readers and other instances list it in GATEWAY_TRUSTED_KEYS_FILE (this .pub file)",
    ),
    KeyKind.CHECKPOINT: KeyUse(
        'GATEWAY_CHECKPOINT_KEY="$(cat {key})" where checkpoints and receipts are signed',
        "auditors check checkpoints and receipts against it",
    ),
    KeyKind.INTEGRATOR: KeyUse(
        "`gateway audit integrate --key {key}` (or GATEWAY_INTEGRATOR_KEY={key})",
        "every gateway and reader lists it in GATEWAY_INTEGRATOR_PUBLIC_KEYS",
    ),
    KeyKind.WITNESS: KeyUse(
        "`gateway audit witness --key {key}` (or GATEWAY_WITNESS_KEY={key})",
        "readers pass --witness-key NAME=<public key>",
    ),
    KeyKind.APPROVER: KeyUse(
        'GATEWAY_APPROVER_KEY="$(cat {key})" in the approver\'s own shell only',
        "gateways pin it in GATEWAY_TRUSTED_APPROVERS as NAME=<public key>",
    ),
}


class NewKey(NamedTuple):
    kind: KeyKind
    path: Path
    public_path: Path
    public_key: str  # hex
    key_id: str  # ed25519:<16 hex>


def new_key_hint(kind: KeyKind) -> str:
    """The sentence an error about a missing or unusable key of ``kind`` ends with."""
    return f"Make one with `gateway keys new {kind.value} --out FILE` and keep it secret."


def new_key_file(kind: KeyKind, out: Path, public_out: Path | None = None) -> NewKey:
    """Make a new key of ``kind`` in ``out`` (mode 0600) and its public key in
    ``public_out`` (``out`` + ``.pub`` by default). Refuses to overwrite either file."""
    public_path = public_out if public_out is not None else out.with_name(out.name + ".pub")
    for path in (out, public_path):
        if path.exists():
            raise InputError(
                f"{str(path)!r} already exists; a key file is never overwritten.",
                hint="Choose another --out, or move the old key away first if it is retired.",
            )
    if not out.parent.is_dir():
        raise InputError(f"the folder {str(out.parent)!r} does not exist.", hint="Create it first.")
    try:
        signer = create_key_file(out)
    except FileExistsError:
        raise InputError(f"{str(out)!r} already exists; a key file is never overwritten.") from None
    except OSError as exc:
        raise InputError(f"cannot write the key file {str(out)!r}: {exc.strerror}.") from None
    try:
        _write_public(public_path, kind, signer)
    except OSError as exc:
        out.unlink()  # a private key without its public half is half a result: none at all
        raise InputError(
            f"cannot write the public key file {str(public_path)!r}: {exc.strerror}."
        ) from None
    return NewKey(kind, out, public_path, signer.public_key, signer.key_id)


def _write_public(path: Path, kind: KeyKind, signer: Signer) -> None:
    text = f"# {kind.value} key {signer.key_id}\n{signer.public_key}\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)  # public: readable by those it is given to
        os.link(tmp, path)
    finally:
        os.unlink(tmp)
