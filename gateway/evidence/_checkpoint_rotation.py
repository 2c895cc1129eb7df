"""Rotating the checkpoint key: the old key retired on the record, the new one named.

    rotation = rotate_checkpoint_key(settings, retire="keys/checkpoint-old.key.pub",
                                     old_key=Path("keys/checkpoint-old.key").read_text())
    rotation.seq, rotation.retired_key_id, rotation.key_id
    eras = CheckpointEras.read(store, signature)   # each checkpoint key, since/retired seqs
    refuse_retired_signer(head.public_key, head.seq, head.created_at, eras)  # signed after

Run with the **new** key configured (GATEWAY_CHECKPOINT_KEY) and the old one given: this
appends a CHECKPOINT_KEY_ROTATION event that names the retired key and the new one, with the
new key's signature over both and the log's id (proof that whoever rotated holds the new key)
and the old key's over the same (``retired_signature``: its holder hands over to the new key,
so the record key's holder alone cannot swap in a checkpoint key of their own). A rotation
whose old key is lost is written only with ``unsafe_old_key_lost`` and carries no
``retired_signature``; its new key is listed as not endorsed, as is the new key of a rotation
recorded before the old key signed them. A ``retired_signature`` that does not check out
makes the event count for nothing. The
event is signed by the record key like every other, so the rotation is on the same
tamper-evident record as the checkpoints: an auditor given the old public key learns the new
one from the log, and from which seq the old one signs nothing. Checkpoints the old key
signed before the rotation stay valid; keep its public key for them.

Every check of a checkpoint against the log (`audit verify --checkpoint`, `--since-verified`,
`audit consistency`) refuses one signed by a key the log retired, for a head at or past the
rotation's seq or made after it: whoever steals a retired key must not be able to vouch for
the log as it is now. (A stolen key can still sign a head it backdates to before the
rotation; a time-stamp or a witness's cosignature is what dates a checkpoint.)
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from contextlib import closing
from datetime import datetime
from typing import NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from audit import AuditStore
from audit.errors import CheckpointError
from audit.proofs.checkpoint_key import parse_key
from audit.store.models import EventDraft, EventKind, StoredEvent
from audit.store.signing import SignatureCheck, TrustedKey, TrustedKeys, UnusableKey
from audit.store.signing import signature_check as record_signature_check
from audit.verify.authenticity import check_event
from gateway._store_adapter import StoreAdapter
from gateway.errors import ConfigurationError, InputError
from gateway.keys import public_keys_given, record_signer, trusted_record_keys
from gateway.settings import Settings

__all__ = [
    "CheckpointEras",
    "CheckpointRotation",
    "refuse_retired_signer",
    "rotate_checkpoint_key",
]

_STATEMENT = "compliance-gateway checkpoint key rotation v1"


class CheckpointRotation(NamedTuple):
    """A recorded rotation: ``retired_key_id`` signs no checkpoint from ``seq`` on;
    ``key_id`` is the new checkpoint key."""

    seq: int
    retired_key_id: str
    key_id: str


class CheckpointEra(NamedTuple):
    """A checkpoint key the log names: from the rotation that brought it in (None: before
    any rotation) to the one that retired it (None: current)."""

    key: TrustedKey
    since_seq: int | None
    retired_seq: int | None
    retired_at: datetime | None = None  # when the rotation that retired it was recorded
    # Whether the key it replaced signed the hand-over (None: no rotation brought it in).
    endorsed: bool | None = None


class CheckpointEras:
    """The checkpoint keys the log's authentic CHECKPOINT_KEY_ROTATION events name."""

    def __init__(self, eras: Iterable[CheckpointEra] = ()) -> None:
        self.by_id = {e.key.key_id: e for e in eras}

    @classmethod
    def read(cls, store: AuditStore, signature: SignatureCheck) -> CheckpointEras:
        eras = cls()
        events = sorted(
            store.iter_events(kind=EventKind.CHECKPOINT_KEY_ROTATION), key=lambda e: e.seq
        )
        for event in events:
            if check_event(store, event, signature):
                continue  # not the gateway's own record: it decides nothing
            eras._apply(event, store.store_id)
        return eras

    def _apply(self, event: StoredEvent, store_id: str) -> None:
        old, new = _named(event.data, "retired_public_key"), _named(event.data, "public_key")
        if old is None or new is None or old.key_id == new.key_id:
            return
        if not _signed_by(event.data, "signature", new, _statement(store_id, old, new)):
            return
        endorsed = "retired_signature" in event.data
        if endorsed and not _signed_by(
            event.data, "retired_signature", old, _statement(store_id, old, new)
        ):
            return  # a hand-over the old key did not sign: altered, it decides nothing
        if old.key_id in self.by_id and self.by_id[old.key_id].retired_seq is not None:
            return  # retired once; a second retirement changes nothing
        if new.key_id in self.by_id:
            return  # a key comes in once
        before = self.by_id.get(old.key_id)
        since = before.since_seq if before else None
        self.by_id[old.key_id] = CheckpointEra(old, since, event.seq, event.recorded_at)
        self.by_id[new.key_id] = CheckpointEra(new, event.seq, None, endorsed=endorsed)

    @property
    def retired(self) -> dict[str, int]:
        return {k: e.retired_seq for k, e in self.by_id.items() if e.retired_seq is not None}


def refuse_retired_signer(
    signer: str | None, seq: int, made: datetime | None, eras: CheckpointEras
) -> None:
    """Refuse (:class:`InputError`) a checkpoint by ``signer`` (its public key) of the head at
    ``seq`` (a tree head: its size), made at ``made`` if it says, when the log retired that
    key before it: a head at or past the rotation's seq, or made after the rotation was
    recorded. A retired key signs nothing from its rotation on; its older checkpoints stay
    valid."""
    if signer is None:
        return
    try:
        key_id = _key_of(signer).key_id
    except UnusableKey:
        return  # not a key at all: the signature check refuses it
    era = eras.by_id.get(key_id)
    if era is None or era.retired_seq is None:
        return
    late = made is not None and era.retired_at is not None and made >= era.retired_at
    if seq < era.retired_seq and not late:
        return
    at = f" ({era.retired_at:%Y-%m-%d %H:%M:%S} UTC)" if era.retired_at is not None else ""
    claim = f"its head is seq {seq}" + (
        f", made {made:%Y-%m-%d %H:%M:%S} UTC" if made is not None else ""
    )
    raise InputError(
        f"the checkpoint is signed by checkpoint key {key_id}, which this log retired at seq "
        f"{era.retired_seq}{at}, and {claim}: a retired key signs nothing after its rotation, "
        "so whoever holds it now cannot vouch for the log.",
        hint="Verify against a checkpoint signed by the current checkpoint key (`gateway keys "
        "list` names it), and treat the retired key as compromised.",
    )


def rotate_checkpoint_key(
    settings: Settings,
    *,
    retire: str,
    old_key: str | None = None,
    unsafe_old_key_lost: bool = False,
) -> CheckpointRotation:
    """Retire the checkpoint key ``retire`` (its public key, or a file holding it) in favour
    of the configured GATEWAY_CHECKPOINT_KEY, by a CHECKPOINT_KEY_ROTATION event signed by
    both keys: ``old_key`` is the retired key's secret (64 hex characters). Without it the
    rotation is refused, unless ``unsafe_old_key_lost``: then it is recorded without the old
    key's signature, and its new key is listed as not endorsed."""
    if settings.checkpoint_key is None:
        raise ConfigurationError(
            "no checkpoint key is configured: the rotation names the new key.",
            hint="Set GATEWAY_CHECKPOINT_KEY to the new checkpoint key (`gateway keys new "
            "checkpoint --out FILE`) and run this again.",
        )
    try:
        seed = parse_key(settings.checkpoint_key.get_secret_value())
    except CheckpointError as exc:
        raise ConfigurationError(exc.message, hint=exc.hint) from None
    private = Ed25519PrivateKey.from_private_bytes(seed)
    new = _key_of(private.public_key().public_bytes_raw().hex())
    old = _retired_key(retire)
    if old.key_id == new.key_id:
        raise InputError(
            f"key {old.key_id} is the configured checkpoint key; a rotation retires the old "
            "key in favour of the new one.",
            hint="Configure the new checkpoint key in GATEWAY_CHECKPOINT_KEY first.",
        )
    old_private = _old_private(old, old_key, unsafe_old_key_lost)
    signer = record_signer(settings, create=True)
    trusted = trusted_record_keys(settings, signer)
    with closing(StoreAdapter.open(settings, signer=signer)) as log:
        eras = log.run(CheckpointEras.read, record_signature_check(trusted, log.store.store_id))
        for key, what in ((new, "the new key"), (old, "key")):
            if key.key_id in eras.retired:
                raise InputError(
                    f"{what} {key.key_id} was already retired at seq {eras.retired[key.key_id]}."
                )
        statement = _statement(log.store.store_id, old, new)
        data = {
            "retired_key_id": old.key_id,
            "retired_public_key": old.public_key,
            "key_id": new.key_id,
            "public_key": new.public_key,
            "signature": _b64(private.sign(statement)),
        }
        if old_private is not None:
            data["retired_signature"] = _b64(old_private.sign(statement))
        appended = log.run(
            AuditStore.append,
            EventDraft(
                kind=EventKind.CHECKPOINT_KEY_ROTATION,
                request_id=f"checkpoint_key_rotation_{uuid.uuid4().hex}",
                data=data,
            ),
        )
    return CheckpointRotation(appended.seq, old.key_id, new.key_id)


def _statement(store_id: str, old: TrustedKey, new: TrustedKey) -> bytes:
    return f"{_STATEMENT}\n{store_id}\n{old.public_key}\n{new.public_key}\n".encode("ascii")


def _signed_by(data: dict[str, object], field: str, key: TrustedKey, statement: bytes) -> bool:
    signature = data.get(field)
    if not isinstance(signature, str):
        return False
    try:
        raw = base64.b64decode(signature, validate=True)
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(key.public_key)).verify(raw, statement)
    except (ValueError, InvalidSignature):
        return False
    return True


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _old_private(
    old: TrustedKey, secret: str | None, unsafe_old_key_lost: bool
) -> Ed25519PrivateKey | None:
    """The retired key, which signs the hand-over; None only when it is declared lost."""
    if secret is None:
        if unsafe_old_key_lost:
            return None
        raise InputError(
            f"retiring checkpoint key {old.key_id} needs that key's signature on the hand-over.",
            hint="Pass the old key's file with --old-key FILE (its secret, 64 hex characters); "
            "if it is lost, --unsafe-old-key-lost records the rotation without it.",
        )
    try:
        private = Ed25519PrivateKey.from_private_bytes(parse_key(secret))
    except CheckpointError:
        raise InputError(
            "--old-key does not hold a checkpoint key (64 hex characters).",
            hint="Pass the old checkpoint key's secret file (not its .pub file).",
        ) from None
    if private.public_key().public_bytes_raw().hex() != old.public_key:
        raise InputError(
            f"--old-key is not the key being retired ({old.key_id}).",
            hint="Pass the secret file of the key --retire names.",
        )
    return private


def _named(data: dict[str, object], field: str) -> TrustedKey | None:
    value = data.get(field)
    if not isinstance(value, str):
        return None
    try:
        return _key_of(value)
    except UnusableKey:
        return None


def _key_of(text: str) -> TrustedKey:
    (key,) = TrustedKeys.of([text])
    return key


def _retired_key(retire: str) -> TrustedKey:
    given = public_keys_given((retire.strip(),))
    hint = (
        "Name the old checkpoint key by its public key (64 hex characters) or a file holding "
        "it (its .pub file from `gateway keys new` or `gateway init`)."
    )
    if len(given) != 1:
        raise InputError(f"{retire[:80]!r} holds {len(given)} public keys, not one.", hint=hint)
    try:
        return _key_of(given[0])
    except UnusableKey:
        raise InputError(f"{retire[:80]!r} is not an Ed25519 public key.", hint=hint) from None
