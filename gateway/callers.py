"""Caller keys: who may call the gateway over HTTP, issued and revoked on the audit record.

    with CallerKeys.open(settings) as keys:
        issued = keys.create("payments-svc")      # issued.key is shown once, never stored
        keys.create("desk-7", task="general_assistant")   # with a default task
        keys.revoke(issued.key_id)
        for record in keys.list(): ...

    ring = KeyRing(keys)                          # what `gateway serve` authenticates against
    ring.refresh()
    ring.authenticate("gwk_...")                 # -> the CallerKey, or None

A key is 32 random bytes (``gwk_`` and 43 URL-safe characters). Only its SHA-256 is kept: a
key has 256 bits of entropy, so a plain hash cannot be searched and a keyed hash would add a
secret to guard for nothing. Issuing and revoking are audit events (``CALLER_KEY``,
``CALLER_KEY_REVOKED``), appended and signed like every other, so who could call as whom,
and since when, is on the same tamper-evident record as the calls themselves. A key event
whose hash, link or record signature does not check out is not trusted: its key does not
authenticate (and a revocation that does not check out still revokes: refusing is safe).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Self

from audit import AuditStore, EventDraft, EventKind, StoredEvent
from audit.store import LogFollower
from audit.verify.authenticity import check_event
from gateway._inputs import check_caller, check_name
from gateway._keys import GATEWAY_VERSION
from gateway._log import log
from gateway._store_adapter import audit_call
from gateway.errors import ConfigurationError, InputError
from gateway.keys import record_signer
from gateway.request import Recorder
from gateway.settings import Settings

__all__ = ["CallerKey", "CallerKeys", "IssuedKey", "KeyRing", "hash_key"]

KEY_PREFIX = "gwk_"
# How far back `keys create` looks for the record keys the servers sign their requests with.
_SIGNER_LOOKBACK = 1000
_KINDS = (EventKind.CALLER_KEY, EventKind.CALLER_KEY_REVOKED)


def hash_key(key: str) -> str:
    """The stored form of a key: ``sha256:<hex>`` of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class CallerKey:
    """A key as the log records it (never the key itself)."""

    key_id: str
    caller: str
    key_hash: str
    created_at: datetime
    created_seq: int
    revoked_at: datetime | None = None
    revoked_seq: int | None = None
    # The task a request from this key goes to when nothing else names one (no task header,
    # no task or routed model id as `model`); None: such a request is refused.
    task: str | None = None
    # A rotation's revocation: the key stays accepted until this moment (its grace), then is
    # refused; None for a revocation that applies at once. replaced_by: the new key's id.
    grace_until: datetime | None = None
    replaced_by: str | None = None

    def accepted(self, now: datetime) -> bool:
        """Whether a request with this key is accepted at ``now``."""
        if self.revoked_seq is None:
            return True
        return self.grace_until is not None and now < self.grace_until

    @property
    def active(self) -> bool:
        return self.accepted(datetime.now(UTC))

    @property
    def in_grace(self) -> bool:
        return self.revoked_seq is not None and self.active


@dataclass(frozen=True)
class IssuedKey:
    """A key just issued: ``key`` exists only here; show it once."""

    key_id: str
    caller: str
    key: str = ""
    seq: int = 0
    task: str | None = None
    # Whether the servers' record keys could be compared with the one that signed it: False
    # on a log with no request yet (nothing says which keys the servers sign with), or when
    # the caller said they trust it (--signer-trusted).
    signer_checked: bool = True
    signed_by: str | None = None  # the record key that signed its CALLER_KEY event

    def __repr__(self) -> str:  # the key never reaches a log line or a traceback
        return f"IssuedKey(key_id={self.key_id!r}, caller={self.caller!r}, seq={self.seq})"


class CallerKeys:
    """Issue, list and revoke caller keys on the audit database ``settings`` names."""

    def __init__(self, recorder: Recorder, *, signer_key_id: str | None = None) -> None:
        self._recorder = recorder
        self._signer_key_id = signer_key_id  # the record key this process signs with

    @property
    def signer_key_id(self) -> str | None:
        """The record key this process signs key events with (None: not configured yet)."""
        return self._signer_key_id

    @classmethod
    def open(cls, settings: Settings, *, create: bool = True) -> CallerKeys:
        recorder = Recorder.open(settings, create=create)
        signer = record_signer(settings, create=False) if create else None
        return cls(recorder, signer_key_id=signer.key_id if signer is not None else None)

    def close(self) -> None:
        self._recorder.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def create(
        self, caller: str, *, task: str | None = None, signer_trusted: bool = False
    ) -> IssuedKey:
        """Issue a key for ``caller`` (with a default ``task``, if given); the CALLER_KEY
        event is committed before it is shown. Refused when the servers writing this log
        sign with other record keys than this process's, unless ``signer_trusted`` says
        they list its public key (see :meth:`_check_signer`)."""
        name = check_caller(caller)
        if name is None:
            raise InputError("a caller key needs a caller name.", hint="Pass --caller NAME.")
        task = check_name(task, "task", example="general_assistant")
        checked = False if signer_trusted else self._check_signer()
        key_id, key, draft = _new_key(name, task)
        appended = self._recorder.append(draft)
        log.info("caller_key_created", key_id=key_id, caller=name, seq=appended.seq)
        return self._issued(key_id, name, key, appended.seq, task, checked)

    def _issued(
        self, key_id: str, caller: str, key: str, seq: int, task: str | None, checked: bool
    ) -> IssuedKey:
        signer = self._recorder.store.signer
        return IssuedKey(
            key_id=key_id,
            caller=caller,
            key=key,
            seq=seq,
            task=task,
            signer_checked=checked,
            signed_by=signer.key_id if signer is not None else None,
        )

    def rotate(
        self, key_id: str, *, grace: timedelta, signer_trusted: bool = False
    ) -> tuple[IssuedKey, CallerKey]:
        """Replace ``key_id`` by a new key for the same caller and task; the old key stays
        accepted for ``grace`` (both work), then is refused. One transaction records both:
        the new key's CALLER_KEY (``replaces``) and the old key's CALLER_KEY_REVOKED with
        ``grace_until`` (the moment it is refused; none for a zero grace: refused at once)."""
        if grace < timedelta(0):
            raise InputError("a rotation's grace cannot be negative.", hint="Pass --grace 24h.")
        old = self._active(key_id)
        checked = False if signer_trusted else self._check_signer()
        new_id, key, draft = _new_key(old.caller, old.task, replaces=old.key_id)
        grace_until = datetime.now(UTC) + grace if grace else None
        data: dict[str, object] = {
            "key_id": old.key_id,
            "caller": old.caller,
            "reason": f"rotated to {new_id}",
            "replaced_by": new_id,
        }
        if grace_until is not None:
            data["grace_until"] = grace_until.isoformat()
        revocation = EventDraft(
            kind=EventKind.CALLER_KEY_REVOKED,
            request_id=old.key_id,
            caller=old.caller,
            data=data,
        )
        created, revoked = self._recorder.append_many([draft, revocation])
        log.info(
            "caller_key_rotated",
            key_id=old.key_id,
            replaced_by=new_id,
            caller=old.caller,
            seq=revoked.seq,
            grace_s=grace.total_seconds(),
        )
        issued = self._issued(new_id, old.caller, key, created.seq, old.task, checked)
        return issued, replace(
            old,
            revoked_at=revoked.recorded_at,
            revoked_seq=revoked.seq,
            grace_until=grace_until,
            replaced_by=new_id,
        )

    def _active(self, key_id: str) -> CallerKey:
        """The key ``key_id``, which must not be revoked or rotated (InputError)."""
        found = {k.key_id: k for k in self.list()}.get(key_id)
        if found is None:
            raise InputError(
                f"no caller key {key_id!r}.", hint="List key ids with `gateway keys list`."
            )
        if found.replaced_by is not None and found.in_grace:
            until = f"{found.grace_until:%Y-%m-%d %H:%M:%S %Z}"
            raise InputError(
                f"caller key {key_id!r} was already rotated to {found.replaced_by} (seq "
                f"{found.revoked_seq}); it is refused from {until}.",
                hint="Rotate the new key, or revoke the old one now with `gateway keys revoke`.",
            )
        if found.revoked_seq is not None:
            raise InputError(f"caller key {key_id!r} is already revoked (seq {found.revoked_seq}).")
        return found

    def _check_signer(self) -> bool:
        """A server accepts a caller key only when it trusts the record key that signed its
        CALLER_KEY event; one signed by a key it does not trust is a 401 for every request
        (the cause only in the server's log). The servers' keys are the ones that signed the
        log's recent requests: a key outside them is refused here, with the fix. A log with
        no requests yet says nothing about the servers: False, not checked (the command
        says so); True when checked."""
        reads = self._recorder.reads
        head = reads.run(AuditStore.head)[0]
        serving = {
            event.key_id
            for event in reads.each(
                AuditStore.iter_events,
                kind=EventKind.REQUEST,
                after_seq=max(0, head - _SIGNER_LOOKBACK),
            )
            if event.key_id
        }
        if not serving or self._signer_key_id is None:
            return False
        if self._signer_key_id in serving:
            return True
        raise ConfigurationError(
            f"this caller key would be signed by the record key {self._signer_key_id}, but the "
            f"servers writing this log sign with {', '.join(sorted(serving))}; a server that "
            "does not trust the signer refuses the key (401) on every request.",
            hint="Run `gateway keys create` with the servers' record key "
            "(GATEWAY_RECORD_KEY_FILE), or list this key's public half in every server's "
            "GATEWAY_TRUSTED_KEYS and pass --signer-trusted.",
        )

    def revoke(self, key_id: str, *, reason: str | None = None) -> CallerKey:
        """Revoke a key by id (a CALLER_KEY_REVOKED event); revoking twice is an InputError."""
        found = {k.key_id: k for k in self.list()}.get(key_id)
        if found is None:
            raise InputError(
                f"no caller key {key_id!r}.", hint="List key ids with `gateway keys list`."
            )
        if found.revoked_seq is not None and not found.in_grace:
            raise InputError(f"caller key {key_id!r} is already revoked (seq {found.revoked_seq}).")
        data: dict[str, object] = {"key_id": key_id, "caller": found.caller}
        if reason:
            data["reason"] = reason[:500]
        appended = self._recorder.append(
            EventDraft(
                kind=EventKind.CALLER_KEY_REVOKED,
                request_id=key_id,
                caller=found.caller,
                data=data,
            )
        )
        log.info("caller_key_revoked", key_id=key_id, caller=found.caller, seq=appended.seq)
        return replace(
            found, revoked_at=appended.recorded_at, revoked_seq=appended.seq, grace_until=None
        )

    def list(self) -> list[CallerKey]:
        """Every key ever issued, oldest first, with its revocation if any."""
        return _fold(self.events(after_seq=0), {})

    def events(self, *, after_seq: int) -> Iterator[tuple[StoredEvent, bool]]:
        """Key events after ``after_seq`` in seq order, each with whether it checks out."""
        reads = self._recorder.reads
        found = [
            e
            for kind in _KINDS
            for e in reads.each(AuditStore.iter_events, kind=kind, after_seq=after_seq)
        ]
        found.sort(key=lambda e: e.seq)
        return self.checked(found)

    def following(self) -> LogFollower:
        """A reader of key events that never skips one committed late (log format 2)."""
        return LogFollower(self._recorder.store, kinds=_KINDS)

    def checked(self, events: Iterable[StoredEvent]) -> Iterator[tuple[StoredEvent, bool]]:
        """Each of ``events`` with whether its hash, link and record signature check out."""
        reads = self._recorder.reads
        signature = self._recorder.signature
        for event in events:
            problems = reads.run(check_event, event, signature)
            if problems:
                log.error("caller_key_event_untrusted", seq=event.seq, problem=problems[0])
            yield event, not problems

    def head_seq(self) -> int:
        return self._recorder.reads.run(AuditStore.head)[0]


def _fold(
    events: Iterator[tuple[StoredEvent, bool]], keys: dict[str, CallerKey]
) -> list[CallerKey]:
    """Apply key events to ``keys`` (by id); return them in issue order."""
    for event, trusted in events:
        data = event.data
        key_id = data.get("key_id")
        if not isinstance(key_id, str):
            continue
        if event.kind == EventKind.CALLER_KEY:
            key_hash, caller = data.get("key_hash"), data.get("caller")
            if not trusted or not isinstance(key_hash, str) or not isinstance(caller, str):
                continue
            if key_id not in keys:
                task = data.get("task")
                keys[key_id] = CallerKey(
                    key_id=key_id,
                    caller=caller,
                    key_hash=key_hash,
                    created_at=event.recorded_at,
                    created_seq=event.seq,
                    task=task if isinstance(task, str) else None,
                )
        elif (known := keys.get(key_id)) is not None:
            revoked = _revoked(known, event, trusted)
            if revoked is not None:
                keys[key_id] = revoked
    return sorted(keys.values(), key=lambda k: k.created_seq)


def _revoked(known: CallerKey, event: StoredEvent, trusted: bool) -> CallerKey | None:
    """``known`` after the revocation ``event``, or None if it changes nothing. A rotation's
    revocation keeps the key accepted until its ``grace_until``; one that does not check out
    still revokes, at once (refusing is safe). Of two revocations the sooner end holds."""
    until = _grace_until(event.data.get("grace_until")) if trusted else None
    if known.revoked_seq is not None:
        if known.grace_until is None:
            return None  # already refused
        if until is not None and until >= known.grace_until:
            return None
    replaced_by = event.data.get("replaced_by")
    return replace(
        known,
        revoked_at=event.recorded_at,
        revoked_seq=event.seq,
        grace_until=until,
        replaced_by=replaced_by if isinstance(replaced_by, str) else known.replaced_by,
    )


def _grace_until(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _new_key(
    caller: str, task: str | None, *, replaces: str | None = None
) -> tuple[str, str, EventDraft]:
    """A new key's id, the key, and its CALLER_KEY event (its hash, never the key)."""
    key_id = "key_" + secrets.token_hex(8)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    data: dict[str, object] = {
        "key_id": key_id,
        "caller": caller,
        "key_hash": hash_key(key),
        "gateway_version": GATEWAY_VERSION,
    }
    if task is not None:
        data["task"] = task
    if replaces is not None:
        data["replaces"] = replaces
    draft = EventDraft(kind=EventKind.CALLER_KEY, request_id=key_id, caller=caller, data=data)
    return key_id, key, draft


class KeyRing:
    """The active keys by hash, read from the log and refreshed incrementally (thread-safe).

    ``refresh`` reads only the key events it has not read yet, late commits included: under
    log format 2 a revocation may commit after a higher seq was read, and it still applies
    at the next refresh (audit.store.LogFollower). A revocation read removes the key at once.
    """

    def __init__(self, keys: CallerKeys) -> None:
        self._keys = keys
        self._lock = threading.Lock()
        self._by_id: dict[str, CallerKey] = {}
        self._by_hash: dict[str, CallerKey] = {}
        self._follower = keys.following()

    def refresh(self) -> int:
        """Read new key events; returns how many active keys there are."""
        with self._lock:
            by_id = dict(self._by_id)
            new = audit_call(self._follower.read)
            _fold(self._keys.checked(new), by_id)
            self._by_id = by_id
            now = datetime.now(UTC)
            self._by_hash = {k.key_hash: k for k in by_id.values() if k.accepted(now)}
            return len(self._by_hash)

    def authenticate(self, presented: str) -> CallerKey | None:
        """The active key ``presented`` is, or None."""
        digest = hash_key(presented)
        found = self._by_hash.get(digest)
        # The dict lookup already matched; compare_digest keeps the final check constant-time.
        if found is None or not hmac.compare_digest(found.key_hash, digest):
            return None
        if not found.accepted(datetime.now(UTC)):
            # A rotated key whose grace is over: refused from now on (its revocation event
            # recorded the moment); the next refresh drops it.
            log.info("caller_key_grace_over", key_id=found.key_id, replaced_by=found.replaced_by)
            return None
        return found
