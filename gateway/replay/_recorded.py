"""What a replay selects and what it knows of one recorded request, from the audit log alone.

    selection = Selection(task="compliance_review", limit=20)
    recorded = recorded_from(store, request_id, events, policies)
    recorded.policy.fingerprint, recorded.request, recorded.response
    request_body(store, recorded)                   # the wire body as JSON, or None
    recorded_requested(store, recorded)             # the overrides it was planned with

Loading a selection page by page is gateway.replay._loading's job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from audit import AuditStore, EventKind, StoredEvent
from audit.errors import ContentMismatch, NotFound
from gateway._attachment_payloads import restored
from gateway._inputs import EXPERIMENT_CALLER
from gateway.errors import InputError
from gateway.policy import IN_BODY, Policy, in_body_overrides
from gateway.providers.base import BETAS_FIELD
from gateway.request import OVERRIDES_PAYLOAD, outside_world

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
    # A live run leaves out (and counts) requests whose original call failed: re-sending
    # them bills a call whose answer has nothing to be compared with.
    include_failed: bool = False

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
    # The payloads of its events, read with its page of the selection (digest -> bytes that
    # hash to it); one that is missing or altered is absent and read on its own when asked.
    payloads: Mapping[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def checkable(self) -> bool:
        """It reached the intent stage under a known policy, so verify's offline checks apply
        (a ``skip`` then means only that re-sending it would not replay it)."""
        return self.request is not None and self.policy is not None

    @property
    def first(self) -> StoredEvent:
        return self.request or self.events[0]

    @property
    def model_id(self) -> str | None:
        return self.request.data.get("model_id") if self.request else None


def selection_text(s: Selection) -> str:
    """What a run was asked to cover, in the words of its options (a report's header)."""
    if s.by_id:
        return f"{len(s.request_ids)} request id(s): {', '.join(s.request_ids)}"
    parts = [
        f"--{name} {value.isoformat() if isinstance(value, datetime) else value}"
        for name, value in (
            ("task", s.task),
            ("caller", s.caller),
            ("since", s.since),
            ("until", s.until),
        )
        if value is not None
    ]
    parts.append(f"the newest {s.limit}" if s.limit is not None else "all matching")
    if s.include_experiments:
        parts.append("experiments included")
    if s.include_failed:
        parts.append("failed originals included")
    return "requests " + " ".join(parts)


def check_selection(selection: Selection) -> None:
    if selection.by_id and _has_filters(selection):
        raise InputError(
            "give request ids or filters (--task, --caller, --since, --until), not both."
        )


def _has_filters(s: Selection) -> bool:
    return any(v is not None for v in (s.task, s.caller, s.since, s.until))


def where_of(s: Selection) -> dict[str, Any]:
    """The store filters of a selection's REQUEST events."""
    return {
        "kind": EventKind.REQUEST,
        "task": s.task,
        "caller": s.caller,
        "since": s.since,
        "until": s.until,
        "exclude_caller": None if s.include_experiments else EXPERIMENT_CALLER,
    }


def experiments_left_out(store: AuditStore, s: Selection) -> int:
    """How many experiment requests the selection's filters matched and left out."""
    if s.by_id or s.include_experiments:
        return 0
    where = where_of(s)
    matched = store.count_requests(**{**where, "exclude_caller": None})
    kept = store.count_requests(**where)
    return matched - kept


def _ids_from_filters(store: AuditStore, s: Selection) -> list[str]:
    if s.limit:  # the database picks them: memory holds ``limit`` ids, not the log's
        return store.newest_requests(s.limit, **where_of(s))
    return list(dict.fromkeys(e.request_id for e in store.iter_events(**where_of(s))))


def recorded_from(
    store: AuditStore,
    request_id: str,
    events: tuple[StoredEvent, ...],
    policies: dict[str, Policy],
) -> Recorded:
    """``events``: the request's whole life in seq order (not empty). ``policies``: the
    policy versions already read, by fingerprint (frozen: requests under one share it)."""
    request = _first(events, EventKind.REQUEST)
    if request is None:
        return Recorded(request_id, events, None, None, None, skip=_why_not_replayable(events))
    fingerprint = request.policy_fingerprint
    policy = policies.get(fingerprint) if fingerprint else None
    if policy is None:
        policy = policy_of(store, request_id, fingerprint)
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


def policy_of(store: AuditStore, request_id: str, fingerprint: str | None) -> Policy:
    """The recorded policy version of a request; ``InputError`` when it is not stored."""
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


def payload(
    store: AuditStore,
    event: StoredEvent,
    name: str,
    prefetched: Mapping[str, bytes] | None = None,
) -> bytes | None:
    """A named payload of an event, or None if the event has none, the row is missing, or its
    bytes no longer match their digest (verify reports which). ``prefetched``: payloads
    already read and checked (a Recorded's), looked up first."""
    ref = event.payload_digests.get(name)
    if ref is None:
        return None
    if prefetched is not None and ref in prefetched:
        return prefetched[ref]
    try:
        return store.payload(ref)
    except (NotFound, ContentMismatch):
        return None


def body_bytes(
    store: AuditStore,
    event: StoredEvent,
    name: str,
    prefetched: Mapping[str, bytes] | None = None,
) -> bytes | None:
    """A recorded request body exactly as sent (its attachments restored), or None as for
    :func:`payload`."""
    try:
        return restored(store, event, name, prefetched)
    except (NotFound, ContentMismatch):
        return None


def request_body(store: AuditStore, recorded: Recorded) -> dict[str, Any] | None:
    """The recorded wire body as JSON (the exact bytes sent are JSON on both providers)."""
    if recorded.request is None:
        return None
    raw = body_bytes(store, recorded.request, "request_body", recorded.payloads)
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    # anthropic-beta values went as a header, not in the bytes: the plan names them in the body.
    betas = recorded.request.data.get("anthropic_beta")
    if isinstance(betas, list) and betas:
        body[BETAS_FIELD] = betas
    return body


def recorded_requested(store: AuditStore, recorded: Recorded) -> dict[str, Any] | None:
    """The overrides a recorded request was planned with: from its ``overrides`` payload
    when it brought content of its own (a system prompt, tools: its data names them by size
    alone), else from its data, as every request recorded before did; each part its data
    names in the request body (``requested_in_body``: its tools, its own system prompt) read
    from there. None when a payload that holds them is gone (erased) or unreadable."""
    request = recorded.request
    if request is None:
        return None
    overrides: dict[str, Any]
    if OVERRIDES_PAYLOAD not in request.payload_digests:
        requested = request.data.get("requested")
        overrides = dict(requested) if isinstance(requested, Mapping) else {}
    else:
        raw = payload(store, request, OVERRIDES_PAYLOAD, recorded.payloads)
        if raw is None:
            return None
        try:
            held = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(held, dict):
            return None
        overrides = held
    if IN_BODY not in request.data:
        return overrides
    return in_body_overrides(overrides, request.data, request_body(store, recorded))


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
    raw = payload(store, recorded.response, "response_body", recorded.payloads)
    if raw is None:
        return None
    try:
        response = json.loads(raw)
    except ValueError:  # a streamed answer is stored as its raw event stream
        return None
    return response if isinstance(response, dict) else None
