"""``--verify``: re-plan a recorded request under its recorded policy and check the record.

    row_checks = verify_request(store, catalog, recorded)   # tuple[Check, ...]
    all(c.ok for c in row_checks)

Offline: no provider is involved. The policy comes from the audit database (the version
that governed the request), never from the current policy file. A model retired since the
recording still verifies: its lifecycle does not change the body that was planned.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from audit import AuditStore, StoredEvent
from audit.canonical import CanonicalizationError, canonical_bytes, digest
from audit.errors import ContentMismatch, NotFound
from gateway._keys import recorded_request_hash
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import GatewayError
from gateway.keys import KEYED_PREFIX, CacheKey
from gateway.policy import Plan, plan_request
from gateway.replay._model import Check
from gateway.replay._recorded import (
    Recorded,
    body_bytes,
    recorded_requested,
    recorded_user_id,
    request_body,
)

BODY_SAME = "re-planned body is the recorded wire body (RFC 8785 form)"


def verify_request(
    store: AuditStore,
    catalog: Catalog,
    recorded: Recorded,
    models: dict[str, ModelInfo] | None = None,
    key: CacheKey | None = None,
) -> tuple[Check, ...]:
    """``models``: the run's models as re-planning sees them, by id (kept across requests, so
    the planner's per-policy-and-model verdict is reused rather than worked out anew).
    ``key``: the deployment's cache key, which a keyed request hash is re-made under."""
    assert recorded.request is not None and recorded.policy is not None  # selection guarantees
    return tuple(
        _checks(store, catalog, recorded, recorded.request, {} if models is None else models, key)
    )


def _checks(
    store: AuditStore,
    catalog: Catalog,
    recorded: Recorded,
    request: StoredEvent,
    models: dict[str, ModelInfo],
    key: CacheKey | None,
) -> Iterator[Check]:
    policy = recorded.policy
    assert policy is not None
    yield Check(
        name="policy",
        ok=policy.fingerprint == request.policy_fingerprint,
        detail=f"recorded policy content hashes to {policy.fingerprint}",
    )
    yield from _payload_checks(store, recorded)
    body, requested = request_body(store, recorded), recorded_requested(store, recorded)
    if body is None or requested is None:
        what = "request body" if body is None else "overrides (caller parts)"
        yield Check(name="replan", ok=False, detail=f"the recorded {what} is not readable")
        return
    model_id = str(request.data.get("model_id"))
    model = models.get(model_id) or _model_as_recorded(catalog, model_id)
    if model is not None:
        models[model_id] = model
    if model is None:
        yield Check(
            name="replan",
            ok=False,
            detail=f"model {request.data.get('model_id')!r} is no longer in the catalog",
        )
        return
    try:
        messages: Any = body.get("messages")  # plan_request validates the shape
        plan = plan_request(
            policy,
            model,
            messages,
            overrides=requested,
            caller=request.caller,
            user_id=recorded_user_id(body),
        )
    except GatewayError as exc:
        yield Check(name="replan", ok=False, detail=f"re-planning failed: {exc.message}")
        return
    yield Check(name="replan", ok=True, detail=f"planned for {model.id} ({plan.api_version})")
    yield _hash_check(plan, request, key)
    yield _body_check(plan, body, streamed=request.data.get("stream") is True)
    if recorded.response is not None:
        yield _sent_check(store, recorded, recorded.response)


def _model_as_recorded(catalog: Catalog, model_id: str) -> ModelInfo | None:
    model = catalog.get(model_id)
    if model is None:
        return None
    # Retirement stops new calls, not the re-planning of old ones.
    return model.model_copy(update={"lifecycle": "active", "retires_at": None})


def _hash_check(plan: Plan, request: StoredEvent, key: CacheKey | None) -> Check:
    version = request.data.get("model_version")
    recorded = request.request_hash or ""
    if recorded.startswith(KEYED_PREFIX) and key is None:
        detail = "the recorded request hash is keyed, and this deployment's cache key is not here"
        return Check(name="request_hash", ok=False, detail=detail)
    model_version = version if isinstance(version, str) else None
    replanned = recorded_request_hash(plan, model_version, key, recorded)
    ok = replanned == request.request_hash
    detail = (
        f"re-planned request hash {replanned} matches the record"
        if ok
        else f"re-planned request hash {replanned} differs from recorded {request.request_hash}"
    )
    return Check(name="request_hash", ok=ok, detail=detail)


def _body_check(plan: Plan, recorded_body: dict[str, object], *, streamed: bool = False) -> Check:
    # A streamed request went on the wire as the plan's body with "stream": true.
    replanned_body = {**plan.body, "stream": True} if streamed else plan.body
    if _same_text(replanned_body, recorded_body):
        return Check(name="wire_body", ok=True, detail=BODY_SAME)
    replanned, recorded = _canonical(replanned_body), _canonical(recorded_body)
    if replanned is None or recorded is None:
        # Two bodies that both fail to canonicalise are not thereby equal: never compare None.
        side = "re-planned" if replanned is None else "recorded"
        return Check(
            name="wire_body",
            ok=False,
            detail=f"the {side} body has no RFC 8785 form (e.g. a non-finite number), "
            "so it cannot be compared",
        )
    ok = replanned == recorded
    detail = BODY_SAME if ok else "re-planned body differs from the recorded wire body"
    return Check(name="wire_body", ok=ok, detail=detail)


def _same_text(a: object, b: object) -> bool:
    """True only if ``a`` and ``b`` are the same JSON value: their sorted-key JSON text is
    equal, which implies equal RFC 8785 forms (the converse need not hold, e.g. 1 and 1.0,
    so False means "compare canonically"). Much cheaper than two canonicalisations. The
    re-planned body has an RFC 8785 form (planning hashed it), so an equal recorded body has
    one too; a non-finite number is refused here and left to the canonical comparison."""
    try:
        left = json.dumps(a, sort_keys=True, allow_nan=False, ensure_ascii=False)
        right = json.dumps(b, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):
        return False
    return left == right


def _sent_check(store: AuditStore, recorded: Recorded, response: StoredEvent) -> Check:
    # What the provider put on the wire must be what the intent event recorded.
    prefetched = recorded.payloads
    sent = body_bytes(store, response, "request_wire", prefetched)
    intended = (
        body_bytes(store, recorded.request, "request_body", prefetched)
        if recorded.request
        else None
    )
    if sent is None or intended is None:
        return Check(name="sent_body", ok=False, detail="a recorded request body is missing")
    ok = sent == intended or _same_json(sent, intended)
    detail = (
        "the body sent is the body recorded before the call"
        if ok
        else "the body sent differs from the body recorded before the call"
    )
    return Check(name="sent_body", ok=ok, detail=detail)


def _same_json(a: bytes, b: bytes) -> bool:
    """Equal as RFC 8785 JSON; bytes that are not canonicalisable JSON must match exactly."""
    try:
        left, right = _canonical(json.loads(a)), _canonical(json.loads(b))
    except ValueError:
        return a == b
    if left is None or right is None:
        return a == b
    return left == right


def _payload_checks(store: AuditStore, recorded: Recorded) -> Iterator[Check]:
    for event in (recorded.request, recorded.response):
        if event is None:
            continue
        for name, ref in sorted(event.payload_digests.items()):
            if ref in recorded.payloads:  # read with its page, and found to hash to ``ref``
                yield Check(
                    name=f"payload:{name}",
                    ok=True,
                    detail=f"seq {event.seq} {name} re-hashes to {ref}",
                )
                continue
            try:
                actual = digest(store.stored_payload(ref))
            except NotFound:
                yield Check(name=f"payload:{name}", ok=False, detail=f"{ref} is missing")
                continue
            except ContentMismatch as exc:
                actual = exc.actual
            ok = actual == ref
            detail = f"seq {event.seq} {name} re-hashes to {actual}"
            yield Check(name=f"payload:{name}", ok=ok, detail=detail)
    if recorded.response is None:
        yield Check(
            name="response", ok=True, detail="no response was recorded (the call failed or died)"
        )
    elif recorded.request is not None:
        ok = recorded.response.request_hash == recorded.request.request_hash
        detail = (
            f"response seq {recorded.response.seq} carries the request's hash"
            if ok
            else f"response seq {recorded.response.seq} names another request hash"
        )
        yield Check(name="response", ok=ok, detail=detail)


def _canonical(value: object) -> bytes | None:
    try:
        return canonical_bytes(value)
    except CanonicalizationError:
        return None
