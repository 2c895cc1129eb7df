"""Record-key eras: a record key signs nothing from its rotation on.

    eras = KeyEras.read(store, signature)          # the log's authentic key rotations
    eras.problem(event)                            # None, or why its signer was retired then
    rotation_data(retired)                         # what a KEY_ROTATION event records

Trust in a public key alone has no end: an old host or a backup that still holds a rotated-out
record key could keep appending events that every reader accepts. So a rotation is an event on
the record: a KEY_ROTATION, signed by the new key, naming the retired key (its key id and
public key). Its own seq, in its hashed body, is the first seq the retired key may not sign;
events the retired key signed below it stay valid (on log format 2 that includes a seq
reserved before the rotation and committed after it).

A rotation counts only when it authenticates (its hash and columns agree with its body, and
its record signature checks out under a trusted key), its signer is itself in its era at that
seq, and it retires another key. A forged or out-of-era rotation is never applied: it could
only take trust away, but a reader must not let an unchecked row decide that either. Verify
reports such a rotation (:func:`rotation_problems`); the read path just ignores it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import and_, or_, select

from audit.store import AuditStore
from audit.store.chain import MAX_DEFECTS, link_hash
from audit.store.models import Defect, DefectKind, EventKind, StoredEvent
from audit.store.schema import EVENTS
from audit.store.signing import SignatureCheck, Trust, TrustedKey, signature_check
from audit.verify.body import parse_body

__all__ = ["KeyEras", "Retirement", "era_defects", "rotation_data"]


class Retirement(NamedTuple):
    """``key_id`` signs nothing from ``from_seq`` on: the seq of the rotation that retired it,
    signed by ``by_key_id``."""

    key_id: str
    from_seq: int
    by_key_id: str


def rotation_data(retired: TrustedKey) -> dict[str, str]:
    """A KEY_ROTATION event's data: the retired key. The new key is the event's signer."""
    return {"retired_key_id": retired.key_id, "retired_public_key": retired.public_key}


def _own_problem(event: StoredEvent, signature: SignatureCheck) -> str | None:
    """Why a KEY_ROTATION row is not the gateway's own record, or None: its hash, the columns
    it was found by against its body, and its record signature."""
    if link_hash(event.prev_hash, event.body) != event.hash:
        return "its hash does not match its body"
    parsed = parse_body(event.body)
    if isinstance(parsed, str):
        return f"its body is not an event body ({parsed})"
    if parsed.get("seq") != event.seq or parsed.get("kind") != EventKind.KEY_ROTATION.value:
        return "its seq or kind column differs from its body"
    return signature(event)


class KeyEras:
    """The retirements in force, from the log's authentic KEY_ROTATION events."""

    def __init__(self, retirements: Iterable[Retirement] = ()) -> None:
        self.retired = {r.key_id: r for r in retirements}

    @classmethod
    def read(cls, store: AuditStore, signature: SignatureCheck) -> KeyEras:
        eras, _ = _applied(store.iter_events(kind=EventKind.KEY_ROTATION), signature)
        return eras

    def problem(self, event: StoredEvent) -> str | None:
        """Why ``event``'s signer may not sign at its seq, or None."""
        return self.out_of_era(event.seq, event.key_id)

    def out_of_era(self, seq: int, kid: str | None) -> str | None:
        retired = self.retired.get(kid) if kid is not None else None
        if retired is None or seq < retired.from_seq:
            return None
        return (
            f"it is signed by key {kid}, which the key rotation at seq {retired.from_seq} "
            f"retired from seq {retired.from_seq} (it signs nothing from then on)"
        )


def _applied(
    rotations: Iterable[StoredEvent], signature: SignatureCheck
) -> tuple[KeyEras, list[tuple[int, str]]]:
    eras = KeyEras()
    refused: list[tuple[int, str]] = []
    for event in sorted(rotations, key=lambda e: e.seq):
        why = _own_problem(event, signature)
        retired = event.data.get("retired_key_id")
        if why is None:
            why = eras.problem(event)  # a retired key cannot rotate anything
        if why is None and (not isinstance(retired, str) or not retired):
            why = "it names no retired key"
        if why is None and retired == event.key_id:
            why = "it retires the key that signed it"
        if why is None and isinstance(retired, str) and retired in eras.retired:
            why = f"key {retired} was already retired at seq {eras.retired[retired].from_seq}"
        if why is not None:
            refused.append((event.seq, f"a key rotation not applied: {why}"))
            continue
        assert isinstance(retired, str) and event.key_id is not None
        eras.retired[retired] = Retirement(retired, event.seq, event.key_id)
    return eras, refused


def era_defects(store: AuditStore, trust: Trust) -> list[Defect]:
    """Verify's check of eras: each key rotation not applied, and each event signed by a
    retired key at or after its retirement, in seq order (at most :data:`MAX_DEFECTS`)."""
    check = signature_check(trust.keys, store.store_id)
    eras, refused = _applied(store.iter_events(kind=EventKind.KEY_ROTATION), check)
    defects = [Defect(seq=seq, kind=DefectKind.BAD_REFERENCE, detail=why) for seq, why in refused]
    if eras.retired:
        signed_out_of_era = or_(
            *(
                and_(EVENTS.c.key_id == r.key_id, EVENTS.c.seq >= r.from_seq)
                for r in eras.retired.values()
            )
        )
        query = (
            select(EVENTS.c.seq, EVENTS.c.key_id)
            .where(signed_out_of_era)
            .order_by(EVENTS.c.seq)
            .limit(MAX_DEFECTS)
        )
        with store.backend.reader.connect() as conn:
            for seq, kid in conn.execute(query):
                why = eras.out_of_era(seq, kid)
                if why is not None:
                    defects.append(Defect(seq=seq, kind=DefectKind.RETIRED_KEY, detail=why))
    return sorted(defects, key=lambda d: d.seq or 0)
