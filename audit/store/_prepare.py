"""Preparing an append: everything about a draft that does not depend on the chain head.

    known = Known()
    prepared = prepare(draft, known)      # validated, canonical-checked, payloads digested

``prepare`` runs outside the chain lock, so a bad draft fails before it can hold up a group
(audit.store._append links and inserts what it prepared).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from audit._fast_canonical import fast_canonical
from audit.canonical import CanonicalizationError, canonical_bytes, digest
from audit.errors import InvalidEvent
from audit.sealing import seal
from audit.store._policy_bytes import checked_policy_bytes
from audit.store.bounded import (
    MAX_DATA_DEPTH,
    MAX_DEPTH,
    TEXT_COLUMNS,
    check_data_size,
    check_draft,
)
from audit.store.chain import BodyTemplate, link_hash
from audit.store.models import EventDraft


@dataclass(frozen=True)
class Prepared:
    """A draft with everything computed that does not need the chain lock."""

    draft: EventDraft
    event_id: str
    body: BodyTemplate  # canonical body but for recorded_at and seq: the lock assigns those
    payload_rows: tuple[dict[str, Any], ...]
    payload_digests: dict[str, str]
    policy_ref: str | None
    policy_row: dict[str, Any] | None  # None when the row is known to be committed already

    def event_row(
        self, seq: int, prev: str, now: datetime, fixed: tuple[bytes, bytes]
    ) -> dict[str, Any]:
        """The events row at ``seq`` after ``prev``; ``fixed`` is the canonical durability
        and time of the batch (see :meth:`BodyTemplate.fill`)."""
        d = self.draft
        body = self.body.fill(fixed[0], fixed[1], seq)
        return {
            "seq": seq,
            "event_id": self.event_id,
            "request_id": d.request_id,
            "kind": d.kind.value,
            "recorded_at": now,
            "task": d.task,
            "caller": d.caller,
            "policy_fingerprint": d.policy_fingerprint,
            "request_hash": d.request_hash,
            "body": body,
            "prev_hash": prev,
            "hash": link_hash(prev, body),
            "signature": None,
            "key_id": None,
        }


class Known:
    """Content rows this process has seen committed, so an append need not write them again.

    Payload and policy rows are content-addressed and append-only, so once committed a row
    stays - as long as the database keeps what it acknowledged. It may not: PostgreSQL with
    ``synchronous_commit=off`` (durability ``os``) loses the last acknowledged commits in a
    server crash, and any database can be restored from a backup. A skipped row would then
    be missing under a later event (``missing_content``). So the set is only a hint:

    - ``enabled=False`` (PostgreSQL with durability ``os``) never skips anything;
    - :meth:`forget` empties it whenever a commit raises and whenever the writer opens a new
      database connection (a restart or restore shows up as a broken then a new connection).

    Only rows from a transaction that committed are added. A policy is kept as its canonical
    bytes (already checked against the fingerprint), and a draft's policy is skipped only when
    its canonical bytes are the same: Python equality would take ``{"x": True}`` for
    ``{"x": 1}`` and skip the fingerprint check.
    """

    LIMIT = 100_000  # digests; past it the set starts over (a cache, never a source of truth)

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()
        self.payloads: set[str] = set()
        self.policies: dict[str, bytes] = {}

    def after_fork(self) -> None:
        """In a forked child: a new lock (the parent's may be held by a thread that is not
        here) and an empty set (the child's first connection is a new one anyway)."""
        self._lock = threading.Lock()
        self.payloads = set()
        self.policies = {}

    def forget(self) -> None:
        """Empty the set (new objects, so a reader holding the old ones is unaffected)."""
        with self._lock:
            self.payloads = set()
            self.policies = {}

    def committed(self, batch: list[Prepared]) -> None:
        if not self.enabled:
            return
        with self._lock:
            if len(self.payloads) > self.LIMIT:
                self.payloads = set()
            if len(self.policies) > 1000:
                self.policies = {}
            for item in batch:
                self.payloads.update(r["digest"] for r in item.payload_rows)
                row = item.policy_row
                if row is not None:
                    self.policies[row["fingerprint"]] = bytes(row["content"])


def _policy(
    draft: EventDraft, canonical: bytes | None, known: Known | None
) -> dict[str, Any] | None:
    """The policies row to write for ``draft`` (None if none, or known committed).
    ``canonical`` is the content's canonical bytes when :func:`_screened` made them."""
    content = draft.policy_content
    if content is None and canonical is None:
        return None
    fingerprint = draft.policy_fingerprint
    if canonical is None:
        canonical = canonical_bytes(content)
    if known is not None and known.policies.get(fingerprint or "") == canonical:
        return None  # that row exists and holds exactly these bytes
    if digest(canonical) != fingerprint:
        raise InvalidEvent(
            "the policy content does not hash to the event's policy_fingerprint.",
            hint="Pass the policy's content() and its fingerprint together.",
        )
    return {"fingerprint": fingerprint, "content": canonical}


_NUL = b"\\u0000"  # how RFC 8785 (and json) writes U+0000 inside a string


def _screened(value: Any, max_depth: int) -> bytes | None:
    """The canonical bytes of ``value`` when they show that :func:`check_draft` accepts it
    (within ``max_depth`` levels, no NUL); None when they do not show it (the walk decides).

    Only the C encoder's bytes (:func:`fast_canonical`: exact JSON types, every string
    written by json's own escaper, nesting bounded by the same walk that builds its input)
    are read this way: NUL anywhere in a key or a string is written as ``\\u0000`` (so no
    ``\\u0000`` in the bytes means no NUL; a literal backslash before ``u0000`` only sends
    the value to the walk), and :func:`fast_canonical` gives None for a value nested deeper
    than ``max_depth``. The bytes are the ones the append needs anyway; the walk they
    replace cost as much again (about 10 us for a policy's content, 300 us for a request
    carrying 30 KB of caller tools).
    """
    fast = fast_canonical(value, max_depth)
    if fast is None or _NUL in fast:
        return None
    return fast


def _columns_plain(draft: EventDraft) -> bool:
    """Whether the text columns and payload names are plain strings without NUL (what
    :func:`check_draft` checks of them); False sends the draft to the full check."""
    for column in TEXT_COLUMNS:
        value = getattr(draft, column)
        if value is not None and (type(value) is not str or "\x00" in value):
            return False
    return all(type(name) is str and "\x00" not in name for name in draft.payloads)


def prepare(draft: EventDraft, known: Known | None = None) -> Prepared:
    """Validate ``draft`` and canonicalise everything of its body the chain lock does not set."""
    # NUL, depth: refused alike on every backend, before the lock. The data's and the
    # policy's canonical bytes show most drafts to be fine (_screened); any other draft gets
    # the full walk, which raises what it always raised, before anything is canonicalised.
    data_bytes = _screened(draft.data, MAX_DATA_DEPTH)
    policy_content = draft.policy_content
    policy_bytes = checked_policy_bytes(draft)  # given as canonical bytes: checked once each
    if policy_bytes is None and policy_content is not None:
        policy_bytes = _screened(policy_content, MAX_DEPTH)
    if (
        data_bytes is None
        or (policy_content is not None and policy_bytes is None)
        or not _columns_plain(draft)
    ):
        check_draft(draft)
    event_id = uuid.uuid4().hex
    salt = draft.seal_salt
    stored = {n: seal(b, salt) for n, b in draft.payloads.items()} if salt else draft.payloads
    digests = {name: digest(b) for name, b in stored.items()}
    given = policy_content is not None or policy_bytes is not None
    policy_ref = draft.policy_fingerprint if given else None
    try:
        if data_bytes is None:  # fail here, before the lock, not in a batch
            data_bytes = canonical_bytes(draft.data)
        check_data_size(data_bytes)
        policy_row = _policy(draft, policy_bytes, known)
        body = BodyTemplate.of(
            event_id=event_id,
            request_id=draft.request_id,
            kind=draft.kind.value,
            task=draft.task,
            caller=draft.caller,
            policy_fingerprint=draft.policy_fingerprint,
            request_hash=draft.request_hash,
            data=data_bytes,
            payloads=digests,
            policy_ref=policy_ref,
        )
    except CanonicalizationError as exc:
        raise InvalidEvent(f"the event data cannot be recorded: {exc}.") from None
    rows = {digests[name]: b for name, b in stored.items()}
    return Prepared(
        draft=draft,
        event_id=event_id,
        body=body,
        payload_rows=tuple(
            {"digest": key, "size": len(b), "content": b} for key, b in rows.items()
        ),
        payload_digests=digests,
        policy_ref=policy_ref,
        policy_row=policy_row,
    )
