"""The record and checkpoint keys a server would trust, for which seqs, and why.

    listing = key_listing(settings)
    for key in listing.record: key.key_id, key.source, key.first_seq, key.retired_seq
    for key in listing.checkpoint: key.key_id, key.configured, key.since_seq, key.retired_seq

A record key is trusted because it is this gateway's own (GATEWAY_RECORD_KEY[_FILE]) or is
listed (GATEWAY_TRUSTED_KEYS[_FILE]); its era ends at the KEY_ROTATION that retired it
(audit.verify.eras). A checkpoint key is the configured GATEWAY_CHECKPOINT_KEY or one a
CHECKPOINT_KEY_ROTATION on the log names; its era runs from the rotation that brought it in
to the one that retired it. Never a private key.
"""

from __future__ import annotations

from contextlib import closing
from typing import NamedTuple

from sqlalchemy import func, select

from audit import AuditStore
from audit.errors import CheckpointError
from audit.proofs.checkpoint_key import parse_key, public_key
from audit.store.schema import EVENTS
from audit.store.signing import TrustedKey, TrustedKeys, signature_check
from audit.verify.eras import KeyEras
from gateway._store_adapter import StoreAdapter
from gateway.errors import ConfigurationError
from gateway.evidence._checkpoint_rotation import CheckpointEras
from gateway.keys import record_signer, trusted_record_keys
from gateway.settings import Settings

__all__ = ["CheckpointKeyInfo", "KeyListing", "RecordKeyInfo", "key_listing"]


class RecordKeyInfo(NamedTuple):
    key_id: str
    public_key: str
    source: str  # "signer": this gateway signs with it; "trusted": listed as trusted
    first_seq: int | None  # the first and last events it signed (None: none yet)
    last_seq: int | None
    retired_seq: int | None  # it signs nothing from this seq on (None: in its era)
    retired_by: str | None  # the key that signed its retirement


class CheckpointKeyInfo(NamedTuple):
    key_id: str
    public_key: str
    configured: bool  # the key of GATEWAY_CHECKPOINT_KEY
    since_seq: int | None  # the rotation that brought it in (None: before any)
    retired_seq: int | None
    # Whether the key it replaced signed the hand-over (None: no rotation brought it in).
    endorsed: bool | None = None


class KeyListing(NamedTuple):
    record: list[RecordKeyInfo]
    checkpoint: list[CheckpointKeyInfo]


def key_listing(settings: Settings) -> KeyListing:
    signer = record_signer(settings, create=False)
    trusted = trusted_record_keys(settings, signer)
    configured = _configured_checkpoint_key(settings)
    with closing(StoreAdapter.open(settings)) as log:
        check = signature_check(trusted, log.store.store_id)
        eras = log.run(KeyEras.read, check)
        checkpoints = log.run(CheckpointEras.read, check)
        signed = log.run(_signed_ranges, trusted)
    own = signer.key_id if signer is not None else None
    record = []
    for key in trusted:
        retired = eras.retired.get(key.key_id)
        first, last = signed.get(key.key_id, (None, None))
        record.append(
            RecordKeyInfo(
                key_id=key.key_id,
                public_key=key.public_key,
                source="signer" if key.key_id == own else "trusted",
                first_seq=first,
                last_seq=last,
                retired_seq=retired.from_seq if retired else None,
                retired_by=retired.by_key_id if retired else None,
            )
        )
    listed = [
        CheckpointKeyInfo(
            key_id=era.key.key_id,
            public_key=era.key.public_key,
            configured=configured is not None and configured.key_id == era.key.key_id,
            since_seq=era.since_seq,
            retired_seq=era.retired_seq,
            endorsed=era.endorsed,
        )
        for era in checkpoints.by_id.values()
    ]
    if configured is not None and configured.key_id not in checkpoints.by_id:
        listed.append(CheckpointKeyInfo(configured.key_id, configured.public_key, True, None, None))
    listed.sort(key=lambda k: (k.since_seq or 0, k.key_id))
    return KeyListing(record, listed)


def _configured_checkpoint_key(settings: Settings) -> TrustedKey | None:
    if settings.checkpoint_key is None:
        return None
    try:
        seed = parse_key(settings.checkpoint_key.get_secret_value())
    except CheckpointError as exc:
        raise ConfigurationError(exc.message, hint=exc.hint) from None
    (key,) = TrustedKeys.of([public_key(seed)])
    return key


def _signed_ranges(store: AuditStore, keys: TrustedKeys) -> dict[str, tuple[int, int]]:
    """Each trusted key's first and last signed seq (one grouped read of the log)."""
    ids = [k.key_id for k in keys]
    if not ids:
        return {}
    query = (
        select(EVENTS.c.key_id, func.min(EVENTS.c.seq), func.max(EVENTS.c.seq))
        .where(EVENTS.c.key_id.in_(ids))
        .group_by(EVENTS.c.key_id)
    )
    with store.backend.reader.connect() as conn:
        return {kid: (first, last) for kid, first, last in conn.execute(query) if kid}
