"""Select recorded requests and load everything a replay needs from the audit log alone.

    selection = Selection(task="compliance_review", limit=20)
    recorded = load_selection(store, selection)      # InputError (exit 2) on bad input
    recorded[0].policy.fingerprint, recorded[0].messages, recorded[0].response

Loading validates before anything is replayed or recorded: an unknown request id or a
request whose recorded policy version is missing from the database is an ``InputError``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from audit import AuditStore, EventKind, StoredEvent
from audit.errors import ContentMismatch, NotFound
from gateway._replayable import outside_world
from gateway.errors import InputError
from gateway.experiment import EXPERIMENT_CALLER
from gateway.policy import Policy

DEFAULT_LIMIT = 50


class Selection(BaseModel):
    """Which recorded requests to replay: ids, or filters over REQUEST events."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_ids: tuple[str, ...] = ()
    task: str | None = None
    caller: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = Field(default=DEFAULT_LIMIT, ge=1)  # None: every matching request
    # Filters leave the experiment runner's samples out unless asked for; ids never do.
    include_experiments: bool = False

    @property
    def by_id(self) -> bool:
        return bool(self.request_ids)


@dataclass(frozen=True)
class Recorded:
    """One recorded request as the log holds it. ``request`` is None when it never reached
    the intent stage (rejected, or served from the cache); ``skip`` then says why."""

    request_id: str
    events: tuple[StoredEvent, ...]
    request: StoredEvent | None
    response: StoredEvent | None
    policy: Policy | None
    skip: str | None = None

    @property
    def first(self) -> StoredEvent:
        return self.request or self.events[0]

    @property
    def model_id(self) -> str | None:
        return self.request.data.get("model_id") if self.request else None


def load_selection(store: AuditStore, selection: Selection) -> list[Recorded]:
    if selection.by_id and _has_filters(selection):
        raise InputError(
            "give request ids or filters (--task, --caller, --since, --until), not both."
        )
    ids = list(dict.fromkeys(selection.request_ids)) or _ids_from_filters(store, selection)
    policies: dict[str, Policy] = {}  # frozen: requests under one policy version share it
    return [_load(store, request_id, policies) for request_id in ids]


def _has_filters(s: Selection) -> bool:
    return any(v is not None for v in (s.task, s.caller, s.since, s.until))


def _where(s: Selection, *, experiments: bool | None = None) -> dict[str, Any]:
    include = s.include_experiments if experiments is None else experiments
    return {
        "kind": EventKind.REQUEST,
        "task": s.task,
        "caller": s.caller,
        "since": s.since,
        "until": s.until,
        "exclude_caller": None if include else EXPERIMENT_CALLER,
    }


def experiments_left_out(store: AuditStore, s: Selection) -> int:
    """How many experiment requests the selection's filters matched and left out."""
    if s.by_id or s.include_experiments:
        return 0
    where = _where(s)
    matched = store.count_requests(**{**where, "exclude_caller": None})
    kept = store.count_requests(**where)
    return matched - kept


def _ids_from_filters(store: AuditStore, s: Selection) -> list[str]:
    if s.limit:  # the database picks them: memory holds ``limit`` ids, not the log's
        return store.newest_requests(s.limit, **_where(s))
    return list(dict.fromkeys(e.request_id for e in store.iter_events(**_where(s))))


def _load(store: AuditStore, request_id: str, policies: dict[str, Policy]) -> Recorded:
    events = tuple(store.events_for_request(request_id))
    if not events:
        raise InputError(
            f"no recorded request has id {request_id!r}.",
            hint="List request ids with 'gateway audit list'.",
        )
    request = _first(events, EventKind.REQUEST)
    if request is None:
        return Recorded(request_id, events, None, None, None, skip=_why_not_replayable(events))
    fingerprint = request.policy_fingerprint
    policy = policies.get(fingerprint) if fingerprint else None
    if policy is None:
        policy = _policy_of(store, request_id, fingerprint)
        if fingerprint:  # always, with content: the content was looked up by it
            policies[fingerprint] = policy
    return Recorded(
        request_id=request_id,
        events=events,
        request=request,
        response=_last(events, EventKind.RESPONSE),
        policy=policy,
        skip=_outside_world(request, policy),
    )


def _outside_world(request: StoredEvent, policy: Policy) -> str | None:
    # The record says so; the recorded policy says so for a record made before it did.
    reason = request.data.get("not_replayable") or outside_world(policy)
    reason = str(reason) if reason else None
    return f"not replayable: {reason}" if reason else None


def _policy_of(store: AuditStore, request_id: str, fingerprint: str | None) -> Policy:
    content = store.policy_content(fingerprint) if fingerprint else None
    if content is None:
        raise InputError(
            f"the policy version {fingerprint} recorded with request {request_id!r} is not in "
            "this audit database, so the request cannot be re-planned.",
            hint="Point GATEWAY_DATABASE_URL at the database the request was recorded in.",
        )
    return Policy.from_content(content)


def _why_not_replayable(events: tuple[StoredEvent, ...]) -> str:
    kinds = {e.kind for e in events}
    if EventKind.CACHE_HIT in kinds:
        hit = _first(events, EventKind.CACHE_HIT)
        served = hit.data.get("served_request_id") if hit else None
        return f"served from the audit log (a cache hit of request {served}); replay that one."
    if EventKind.REJECTED in kinds:
        return "rejected by its policy, so nothing was sent."
    if EventKind.REPLAY in kinds:
        return "a replay run, not a request."
    return f"not a model request ({', '.join(sorted(k.value for k in kinds))})."


def _first(events: tuple[StoredEvent, ...], kind: EventKind) -> StoredEvent | None:
    return next((e for e in events if e.kind is kind), None)


def _last(events: tuple[StoredEvent, ...], kind: EventKind) -> StoredEvent | None:
    return next((e for e in reversed(events) if e.kind is kind), None)


def payload(store: AuditStore, event: StoredEvent, name: str) -> bytes | None:
    """A named payload of an event, or None if the event has none, the row is missing, or its
    bytes no longer match their digest (verify reports which)."""
    ref = event.payload_digests.get(name)
    if ref is None:
        return None
    try:
        return store.payload(ref)
    except (NotFound, ContentMismatch):
        return None


def request_body(store: AuditStore, recorded: Recorded) -> dict[str, Any] | None:
    """The recorded wire body as JSON (the exact bytes sent are JSON on both providers)."""
    if recorded.request is None:
        return None
    raw = payload(store, recorded.request, "request_body")
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def recorded_user_id(body: dict[str, Any]) -> str | None:
    """The ``metadata.user_id`` the recorded body carried: an HMAC of the caller under the
    recording deployment's salt, which a re-plan cannot recompute (and need not: it re-plans
    the request that was sent, identifier included)."""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    return user_id if isinstance(user_id, str) else None


def response_json(store: AuditStore, recorded: Recorded) -> dict[str, Any] | None:
    if recorded.response is None:
        return None
    raw = payload(store, recorded.response, "response_body")
    if raw is None:
        return None
    try:
        response = json.loads(raw)
    except ValueError:  # a streamed answer is stored as its raw event stream
        return None
    return response if isinstance(response, dict) else None
