"""Legal holds: content in a hold's scope is never erased until the hold is released.

    hold = place_hold(store, HoldScope(task="kyc", since=..., until=...), reason=..., actor=...)
    release_hold(store, hold.hold_id, reason=..., actor=...)
    holds = active_holds(store, check)         # authenticated, released ones left out
    blocking = holding(holds, event)           # the first hold a REQUEST falls under, or None

A hold and its release are events (LEGAL_HOLD, HOLD_RELEASE) under the hold's id, so who
held what, why and when is on the record. Holds are read back through the read path's own
check (hash, link, signature under the trusted keys): a forged release cannot lift a hold,
and a hold that does not check out stops every erasure (fail closed) rather than being
ignored.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from audit import AuditStore, StoredEvent
from audit.store.erasure import Reference
from audit.store.models import EventDraft, EventKind
from audit.verify.authenticity import SignatureCheck, check_event
from gateway.errors import InputError, IntegrityAlert

__all__ = ["Hold", "HoldScope", "active_holds", "holding", "place_hold", "release_hold"]


class HoldScope(BaseModel):
    """What a hold covers: every given field must match (a date range is on the request's
    recorded time, ``until`` exclusive). At least one field is required."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str | None = None
    caller: str | None = None
    request_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    # A data subject's keyed digest (gateway.keys.subject_tag), never the identifier, and
    # its digests under the key ring's earlier cache keys (requests recorded before a key
    # was replaced carry those).
    subject: str | None = None
    subject_tags: tuple[str, ...] | None = None

    def covers(self, event: Reference | StoredEvent) -> bool:
        return (
            (
                self.subject is None
                or _subject(event) == self.subject
                or _subject(event) in (self.subject_tags or ())
            )
            and (self.task is None or event.task == self.task)
            and (self.caller is None or event.caller == self.caller)
            and (self.request_id is None or event.request_id == self.request_id)
            and (self.since is None or event.recorded_at >= self.since)
            and (self.until is None or event.recorded_at < self.until)
        )

    def text(self) -> str:
        parts = [f"{k}={v}" for k, v in self.model_dump(mode="json").items() if v is not None]
        return ", ".join(parts)


def _subject(event: Reference | StoredEvent) -> object:
    return event.subject if isinstance(event, Reference) else event.data.get("subject")


class Hold(NamedTuple):
    hold_id: str
    seq: int
    scope: HoldScope
    reason: str
    actor: str


def place_hold(store: AuditStore, scope: HoldScope, *, reason: str, actor: str) -> Hold:
    if not any(v is not None for v in scope.model_dump().values()):
        raise InputError(
            "a hold needs a scope.",
            hint="Give --task, --caller, --request, --subject or a date range (--since/--until).",
        )
    hold_id = f"hold_{uuid.uuid4().hex}"
    data = {"scope": scope.model_dump(mode="json"), "reason": reason, "actor": actor}
    appended = store.append(EventDraft(kind=EventKind.LEGAL_HOLD, request_id=hold_id, data=data))
    return Hold(hold_id, appended.seq, scope, reason, actor)


def release_hold(store: AuditStore, hold_id: str, *, reason: str, actor: str) -> int:
    """Release an active hold; returns the release event's seq."""
    events = store.events_for_request(hold_id)
    kinds = {e.kind for e in events}
    if EventKind.LEGAL_HOLD not in kinds:
        raise InputError(
            f"there is no legal hold {hold_id!r}.", hint="`gateway audit holds` lists them."
        )
    if EventKind.HOLD_RELEASE in kinds:
        raise InputError(f"legal hold {hold_id!r} was already released.")
    data = {"reason": reason, "actor": actor}
    draft = EventDraft(kind=EventKind.HOLD_RELEASE, request_id=hold_id, data=data)
    return store.append(draft).seq


def active_holds(store: AuditStore, signature: SignatureCheck | None) -> list[Hold]:
    """The holds not released, each hold and release authenticated first: one that does not
    check out is an :class:`IntegrityAlert` (nothing may be erased until it is resolved)."""
    held: dict[str, Hold] = {}
    released: set[str] = set()
    for kind in (EventKind.LEGAL_HOLD, EventKind.HOLD_RELEASE):
        for event in store.iter_events(kind=kind):
            problems = check_event(store, event, signature)
            if problems:
                raise IntegrityAlert(
                    f"the {kind.value} event at seq {event.seq} did not check out "
                    f"({problems[0]}), so nothing is erased.",
                    problems=tuple(problems),
                )
            if kind is EventKind.HOLD_RELEASE:
                released.add(event.request_id)
                continue
            data = event.data
            scope = HoldScope.model_validate(data.get("scope") or {})
            held[event.request_id] = Hold(
                event.request_id,
                event.seq,
                scope,
                str(data.get("reason", "")),
                str(data.get("actor", "")),
            )
    return [h for hold_id, h in held.items() if hold_id not in released]


def holding(holds: list[Hold], request: Reference | StoredEvent) -> Hold | None:
    """The first active hold whose scope covers ``request`` (its REQUEST event)."""
    return next((h for h in holds if h.scope.covers(request)), None)
