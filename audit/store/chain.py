"""The event chain's shapes and links: rows as stored, bodies as hashed, the link hash.

    body = event_body(seq=1, event_id="e1", ..., data={}, payloads={}, policy_ref=None)
    link_hash(GENESIS, body)                  # -> "sha256:..." of GENESIS || body

Every event stores its body exactly as hashed (RFC 8785 bytes) and ``hash = sha256(prev_hash
|| body)``; the first event links to :data:`GENESIS`. The searchable columns are copies of
fields inside the body (:data:`MIRRORED`), so verify compares them too: an edited column that
the hash does not cover would otherwise go unnoticed. Verify's walk is
:class:`audit.verify._verifier.Verifier`; how it reads bodies, :mod:`audit.verify.body`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import Result

from audit.canonical import canonical_bytes, digest
from audit.store.models import format_time as format_time  # one definition, beside StoredEvent
from audit.store.schema import EVENT_COLUMNS

BODY_VERSION = 1  # the ``v`` of every body the store writes; verify reads no other
GENESIS = "sha256:" + "0" * 64
MAX_DEFECTS = 1000
# Columns that must equal the same-named field inside the hashed body: all but the chain's
# own (body, prev_hash, hash), the two verify checks in their own way (seq; recorded_at,
# held in the body as text) and the record signature, which signs the hash from outside it
# (audit.store.signing). Migration 0005's trigger checks the same list on PostgreSQL.
MIRRORED = tuple(
    c
    for c in EVENT_COLUMNS
    if c not in {"seq", "recorded_at", "body", "prev_hash", "hash", "signature", "key_id"}
)


_mirrored = itemgetter(*(EVENT_COLUMNS.index(c) for c in MIRRORED))


def as_bytes(value: object) -> bytes:
    """A BLOB column's value as bytes, whatever type a hand-edit left in it.

    SQLite keeps whatever type a statement wrote: ``replace(content, ...)`` turns a BLOB into
    TEXT (and ``bytes(str)`` raises). Encoding gives the bytes that were written, so a digest
    check then names the edit instead of crashing on it.
    """
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8")  # an INTEGER or REAL written over the BLOB


class EventRow(NamedTuple):
    """One ``events`` row as verify reads it. The fields are the table's columns in order
    (:data:`audit.store.schema.EVENT_COLUMNS`; a test pins the two together): a tuple, because
    verify's hot loop reads millions of them."""

    seq: int
    event_id: str
    request_id: str
    kind: str
    recorded_at: datetime
    task: str | None
    caller: str | None
    policy_fingerprint: str | None
    request_hash: str | None
    body: bytes
    prev_hash: str
    hash: str
    signature: str | None = None
    key_id: str | None = None

    @classmethod
    def from_result(cls, result: Result[Any]) -> list[EventRow]:
        """Every row of ``result``, a select of the ``events`` columns, with the types a
        hand-edit may have changed put back (see :func:`as_bytes`): verify must still read
        such a row and name it, not crash on it.

        The result's column names are checked once, then each row is zipped with them; a
        lookup by name per value would cost more than the rest of verify's work on a row.
        """
        names = tuple(result.keys())
        if names != cls._fields:
            raise ValueError(f"not a select of the events columns: {', '.join(names)}")
        return [
            cls._make([v if fix is None else fix(v) for fix, v in zip(_RETYPE, row, strict=True)])
            for row in result
        ]


# What EventRow.from_result applies to a column's value, by column name (SQLite keeps
# whatever type a statement wrote), laid out in the columns' order.
_RETYPES: dict[str, Callable[[Any], Any]] = {"body": as_bytes, "prev_hash": str, "hash": str}
_RETYPE = tuple(_RETYPES.get(name) for name in EventRow._fields)


class Census(NamedTuple):
    """What the events table holds, counted before the walk: ``rows`` in all, ``highest`` seq
    (0 if none), and the seqs below 1 (at most :data:`MAX_DEFECTS`), which no walk reaches."""

    rows: int
    highest: int
    below_one: tuple[int, ...]
    below_one_count: int


def _members(value: dict[str, Any]) -> bytes:
    """The canonical members of a non-empty object, without its braces."""
    return canonical_bytes(value)[1:-1]


class BodyTemplate(NamedTuple):
    """An event body with its store- and chain-dependent fields left out: ``durability`` (the
    store's), ``recorded_at`` and ``seq`` (assigned under the chain lock).

    Everything else is canonicalised when the draft is prepared, outside the chain lock;
    :meth:`fill` adds the rest. The parts are laid out as RFC 8785 lays out the whole object:
    members sorted by key (all keys are ASCII: ``caller``, ``data``, ``durability``,
    ``event_id``, ``kind``, ``payloads``, ``policy_fingerprint``, ``policy_ref``,
    ``recorded_at``, ``request_hash``, ``request_id``, ``seq``, ``task``, ``v``), each
    ``"key":value`` canonical, joined by commas.
    """

    head: bytes  # {"caller":...,"data":...,"durability":
    before_time: bytes  # ,"event_id":...,"policy_ref":...,"recorded_at":
    before_seq: bytes  # ,"request_hash":...,"request_id":...,"seq":
    tail: bytes  # ,"task":...,"v":1}

    @classmethod
    def of(
        cls,
        *,
        event_id: str,
        request_id: str,
        kind: str,
        task: str | None,
        caller: str | None,
        policy_fingerprint: str | None,
        request_hash: str | None,
        data: Mapping[str, Any] | bytes,
        payloads: Mapping[str, str],
        policy_ref: str | None,
    ) -> BodyTemplate:
        """``data`` may be given as its canonical bytes already (the append path has them)."""
        data_bytes = data if isinstance(data, bytes) else canonical_bytes(dict(data))
        middle = {
            "event_id": event_id,
            "kind": kind,
            "payloads": dict(payloads),
            "policy_fingerprint": policy_fingerprint,
            "policy_ref": policy_ref,
        }
        return cls(
            b"".join((b'{"caller":', canonical_bytes(caller), b',"data":', data_bytes)),
            b"," + _members(middle) + b',"recorded_at":',
            b"," + _members({"request_hash": request_hash, "request_id": request_id}) + b',"seq":',
            b"," + _members({"task": task, "v": BODY_VERSION}) + b"}",
        )

    def fill(self, durability: bytes, recorded_at: bytes, seq: int) -> bytes:
        """The body. ``durability`` and ``recorded_at`` are canonical (:func:`canonical_time`)."""
        return b"".join(
            (
                self.head,
                b',"durability":',
                durability,
                self.before_time,
                recorded_at,
                self.before_seq,
                canonical_bytes(seq),
                self.tail,
            )
        )


def canonical_time(moment: datetime) -> bytes:
    return canonical_bytes(format_time(moment))


def event_body(
    *,
    seq: int,
    event_id: str,
    request_id: str,
    kind: str,
    recorded_at: datetime,
    task: str | None,
    caller: str | None,
    policy_fingerprint: str | None,
    request_hash: str | None,
    durability: str,
    data: Mapping[str, Any] | bytes,
    payloads: Mapping[str, str],
    policy_ref: str | None,
) -> bytes:
    """The RFC 8785 bytes of an event (see :class:`BodyTemplate`, which builds them)."""
    template = BodyTemplate.of(
        event_id=event_id,
        request_id=request_id,
        kind=kind,
        task=task,
        caller=caller,
        policy_fingerprint=policy_fingerprint,
        request_hash=request_hash,
        data=data,
        payloads=payloads,
        policy_ref=policy_ref,
    )
    return template.fill(canonical_bytes(durability), canonical_time(recorded_at), seq)


def link_hash(prev_hash: str, body: bytes) -> str:
    """``sha256(prev_hash || body)``. A hash the store writes is ASCII; a hand-edited one that
    is not is taken as its UTF-8 bytes, so a check names the row (a broken link, a hash
    mismatch) instead of failing on it."""
    return digest(prev_hash.encode("utf-8", "surrogatepass") + body)
