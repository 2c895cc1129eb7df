"""Rotating the record key: the old key retired on the record, from the rotation's seq on.

    rotation = rotate_record_key(settings, retire="ed25519:0123456789abcdef")
    rotation.seq, rotation.retired_key_id, rotation.key_id

Run with the **new** key configured (GATEWAY_RECORD_KEY or GATEWAY_RECORD_KEY_FILE) and the
old public key still trusted (GATEWAY_TRUSTED_KEYS): this appends a KEY_ROTATION event signed
by the new key that names the old one. From that seq on, verify and the read path refuse
anything the old key signs (audit.verify.eras); what it signed before stays valid.

The rotation is an operator's explicit act, not something a gateway does at start when its key
differs from the last one: several gateways may share a log with keys of their own, and one
started with the wrong key must not retire the others' key by starting.
"""

from __future__ import annotations

import uuid
from contextlib import closing
from typing import NamedTuple

from audit import AuditStore
from audit.store.models import EventDraft, EventKind
from audit.store.signing import Signer, TrustedKey, TrustedKeys, UnusableKey, signature_check
from audit.verify.eras import KeyEras, rotation_data
from gateway._store_adapter import StoreAdapter
from gateway.errors import ConfigurationError, InputError
from gateway.keys import record_signer, trusted_record_keys
from gateway.settings import Settings

__all__ = ["KeyRotation", "rotate_record_key"]


class KeyRotation(NamedTuple):
    """A recorded rotation: ``retired_key_id`` signs nothing from ``seq`` on; ``key_id``
    (the new key) signed the rotation."""

    seq: int
    retired_key_id: str
    key_id: str


def rotate_record_key(settings: Settings, *, retire: str) -> KeyRotation:
    """Retire the trusted record key ``retire`` (its key id or public key) from the next seq
    on, by a KEY_ROTATION event that this gateway's record key signs."""
    signer = record_signer(settings, create=False)
    if signer is None:
        raise ConfigurationError(
            "no record key is configured to sign the rotation.",
            hint="Configure the new record key (GATEWAY_RECORD_KEY_FILE) and run this again.",
        )
    trusted = trusted_record_keys(settings, signer)
    retired = _retired_key(trusted, retire)
    if retired.key_id == signer.key_id:
        raise InputError(
            f"key {retired.key_id} is this gateway's own record key; a rotation retires the "
            "old key and is signed by the new one.",
            hint="Configure the new record key first, keep the old public key in "
            "GATEWAY_TRUSTED_KEYS, then retire the old key.",
        )
    with closing(StoreAdapter.open(settings, signer=signer)) as log:
        eras = log.run(KeyEras.read, signature_check(trusted, log.store.store_id))
        _refuse_if_retired(eras, signer, retired)
        appended = log.run(
            AuditStore.append,
            EventDraft(
                kind=EventKind.KEY_ROTATION,
                request_id=f"key_rotation_{uuid.uuid4().hex}",
                data=rotation_data(retired),
            ),
        )
    return KeyRotation(appended.seq, retired.key_id, signer.key_id)


def _retired_key(trusted: TrustedKeys, retire: str) -> TrustedKey:
    wanted = retire.strip()
    for key in trusted:
        if wanted in (key.key_id, key.public_key):
            return key
    try:
        (given,) = TrustedKeys.of([wanted])
    except UnusableKey:
        given = None
    if given is not None:
        for key in trusted:
            if key.key_id == given.key_id:
                return key
    raise InputError(
        f"{wanted[:80]!r} is not one of the trusted record keys.",
        hint="Name the old key by its key id (ed25519:...) or public key, and keep its public "
        "key in GATEWAY_TRUSTED_KEYS: its events before the rotation stay valid.",
    )


def _refuse_if_retired(eras: KeyEras, signer: Signer, retired: TrustedKey) -> None:
    if signer.key_id in eras.retired:
        at = eras.retired[signer.key_id].from_seq
        raise ConfigurationError(
            f"this gateway's record key {signer.key_id} was itself retired at seq {at}, so it "
            "cannot sign a rotation.",
            hint="Configure the current record key.",
        )
    if retired.key_id in eras.retired:
        at = eras.retired[retired.key_id].from_seq
        raise InputError(f"key {retired.key_id} was already retired at seq {at}.")
