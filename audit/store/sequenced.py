"""Format 2 of the log (PostgreSQL): what writers, the integrator and readers share.

    era = sequenced_from(conn)             # the first format-2 seq, or None (format 1)
    era = begin_sequenced(conn)            # begins format 2 at head + 1 (once; idempotent)
    row = void_row(seq, signer, "rolled back", durability, store_id=store.store_id)

Under format 2 (migration 0010, docs/scaling.md) a writer takes its seqs from the
``events_seq`` SEQUENCE and commits rows that stand alone: ``prev_hash`` is ``''`` and
``hash`` is ``sha256(body)`` (so ``hash == link_hash(prev_hash, body)`` still holds, and
every reader's own-hash check is unchanged), signed under
:data:`audit.store.signing.SEQUENCED_DOMAIN`. The integrator links them afterwards into the
``chain`` table: ``chain.hash = sha256(prev ‖ event hash)``, the first link's ``prev`` the
last format-1 event's hash. A seq whose writer never committed gets a ``void`` event, so
every seq is exactly one event or one void.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, text

from audit.canonical import canonical_bytes, digest
from audit.store.chain import BodyTemplate, canonical_time
from audit.store.models import EventKind
from audit.store.signing import SEQUENCED_PREV, Signer

ERA_KEY = "sequenced_from"  # the audit_meta row migration 0010's function writes
LOG_FORMATS = (1, 2)


def sequenced_from(conn: Connection) -> int | None:
    """The first format-2 seq of the log, None while it is in format 1 (or on SQLite)."""
    value = conn.execute(
        text("SELECT value FROM audit_meta WHERE key = :k"), {"k": ERA_KEY}
    ).scalar_one_or_none()
    return None if value is None else int(value)


def begin_sequenced(conn: Connection) -> int:
    """Begin format 2 after the head (under the chain lock), or return the seq it began at."""
    return int(conn.execute(text("SELECT audit_begin_sequenced()")).scalar_one())


def unlinked(conn: Connection, era: int, seqs: list[int]) -> set[int]:
    """Which of ``seqs`` are format-2 events the integrator has not linked yet."""
    wanted = sorted(s for s in set(seqs) if s >= era)
    if not wanted:
        return set()
    linked = conn.execute(
        text("SELECT seq FROM chain WHERE seq = ANY(:s)"), {"s": wanted}
    ).scalars()
    return set(wanted) - {int(s) for s in linked}


def unlinked_requests(conn: Connection, era: int, request_ids: list[str]) -> set[str]:
    """Which of ``request_ids`` have a format-2 event the integrator has not linked yet:
    one query for them all (audit list asks once a page, not once a row)."""
    if not request_ids:
        return set()
    found = conn.execute(
        text(
            "SELECT DISTINCT e.request_id FROM events e WHERE e.request_id = ANY(:ids) "
            "AND e.seq >= :era AND NOT EXISTS (SELECT 1 FROM chain c WHERE c.seq = e.seq)"
        ),
        {"ids": sorted(set(request_ids)), "era": era},
    ).scalars()
    return {str(r) for r in found}


def chain_link(prev: str, event_hash: str) -> str:
    """A format-2 event's link: ``sha256(prev ‖ its hash)`` over the ASCII of both. A hash the
    store writes is ASCII; a hand-edited one that is not is taken as its UTF-8 bytes (as
    :func:`audit.store.chain.link_hash` does), so verify names the row instead of failing."""
    return digest((prev + event_hash).encode("utf-8", "surrogatepass"))


def void_row(
    seq: int,
    signer: Signer | None,
    reason: str,
    durability: bytes,
    now: datetime | None = None,
    *,
    store_id: str,
) -> dict[str, Any]:
    """The events row that voids ``seq``: a body of kind ``void`` whose data says why,
    signed (as a format-2 event) by whoever voids it. Its request id is its own event id:
    a void belongs to no request."""
    now = now or datetime.now(UTC)
    event_id = uuid.uuid4().hex
    body = BodyTemplate.of(
        event_id=event_id,
        request_id=event_id,
        kind=EventKind.VOID.value,
        task=None,
        caller=None,
        policy_fingerprint=None,
        request_hash=None,
        data=canonical_bytes({"reason": reason}),
        payloads={},
        policy_ref=None,
    ).fill(durability, canonical_time(now), seq)
    own = digest(body)
    return {
        "seq": seq,
        "event_id": event_id,
        "request_id": event_id,
        "kind": EventKind.VOID.value,
        "recorded_at": now,
        "task": None,
        "caller": None,
        "policy_fingerprint": None,
        "request_hash": None,
        "body": body,
        "prev_hash": SEQUENCED_PREV,
        "hash": own,
        "signature": None
        if signer is None
        else signer.sign(own, sequenced=True, store_id=store_id),
        "key_id": None if signer is None else signer.key_id,
    }
