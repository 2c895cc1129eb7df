"""The stages of one request that do not depend on how the caller waits (DESIGN.md §3).

``Gateway`` and ``AsyncGateway`` drive these stages in order; the pipeline owns every audit
write, so both clients record exactly the same events:

    prepared = pipeline.prepare("compliance_review", prompt="...", caller="payments-svc")
    result = pipeline.cached_result(prepared)            # replay mode only
    pipeline.record_intent(prepared, wire)                # before any upstream call
    reply = provider.send(..., on_attempt_failed=...)   # record_attempt_failed per failure
    result = pipeline.record_outcome(prepared, reply, wire)  # after the call

Audit store errors are translated into ``AuditWriteError`` at one place, ``_append``.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol

import structlog

from audit import Appended, AuditStore, EventDraft, EventKind, StoredEvent
from audit.canonical import canonical_digest
from audit.errors import AuditStoreError
from gateway._inputs import check_caller, messages_from_input, safe_label
from gateway._output_check import OutputCheck, check_json_output, response_text
from gateway._served import Served, ServedMemo
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import (
    AuditWriteError,
    GatewayError,
    InputError,
    OutputValidationError,
    PolicyError,
    UpstreamError,
)
from gateway.policy import Plan, Policy, PolicySet, plan_request
from gateway.providers.base import AttemptFailure, ProviderReply
from gateway.result import Result

log = structlog.get_logger("gateway")

try:
    GATEWAY_VERSION = version("compliance-gateway")
except PackageNotFoundError:  # running from a source tree without installation
    GATEWAY_VERSION = "0+unknown"


class ModelVersions(Protocol):
    def model_version(self, model_id: str) -> str: ...


@dataclass(frozen=True)
class Prepared:
    """A request that passed its policy: everything needed to call and to record."""

    request_id: str
    caller: str | None
    policy: Policy
    model: ModelInfo
    plan: Plan
    request_hash: str
    model_version: str | None


def request_hash_for(plan: Plan, model_version: str | None) -> str:
    """The cache and audit key. Local models add their weights digest, so that a retrained
    local model never serves an old answer; Claude model ids are already fixed models."""
    if model_version is None:
        return plan.request_hash
    return canonical_digest(
        {
            "provider": plan.provider,
            "api_version": plan.api_version,
            "body": plan.body,
            "model_version": model_version,
        }
    )


def new_request_id() -> str:
    return "req_" + uuid.uuid4().hex


class RequestPipeline:
    def __init__(
        self,
        *,
        policies: PolicySet,
        catalog: Catalog,
        store: AuditStore,
        durability: str,
        local_versions: ModelVersions,
        policy_transform: Any = None,
    ) -> None:
        self.policies = policies
        self.catalog = catalog
        self.store = store
        self.durability = durability
        self._local_versions = local_versions
        self._policy_transform = policy_transform
        self._served = ServedMemo()

    # -- stage 1-3: resolve, plan, key ---------------------------------------------------

    def prepare(
        self,
        task: str,
        *,
        prompt: object = None,
        messages: object = None,
        caller: object = None,
        overrides: Mapping[str, object] | None = None,
    ) -> Prepared:
        request_id = new_request_id()
        policy: Policy | None = None
        try:
            checked_caller = check_caller(caller)
            if overrides is not None and not isinstance(overrides, Mapping):
                raise InputError("overrides must be a mapping of parameter name to value.")
            policy = self.policies.get(task)
            if self._policy_transform is not None:
                policy = self._policy_transform(policy)
            model = self.catalog.get(policy.model_id)
            if model is None:  # review refuses such a policy; this guards an edited catalog
                raise PolicyError(f"model {policy.model_id!r} is not in the model catalog.")
            plan = plan_request(
                policy, model, messages_from_input(prompt, messages), overrides=overrides
            )
            model_version = (
                self._local_versions.model_version(model.id) if model.provider == "local" else None
            )
        except (PolicyError, InputError) as exc:
            self._record_rejected(request_id, task, caller, policy, overrides, exc)
            raise
        return Prepared(
            request_id=request_id,
            caller=checked_caller,
            policy=policy,
            model=model,
            plan=plan,
            request_hash=request_hash_for(plan, model_version),
            model_version=model_version,
        )

    def _record_rejected(
        self,
        request_id: str,
        task: object,
        caller: object,
        policy: Policy | None,
        overrides: object,
        error: GatewayError,
    ) -> None:
        requested = _json_safe_overrides(overrides)
        self._append(
            EventDraft(
                kind=EventKind.REJECTED,
                request_id=request_id,
                task=safe_label(task),
                caller=safe_label(caller) if caller is not None else None,
                policy_fingerprint=policy.fingerprint if policy else None,
                request_hash=None,
                data={
                    "error": type(error).__name__,
                    "key": getattr(error, "key", None),
                    "reason": safe_label(error.message),
                    "requested": requested,
                    "gateway_version": GATEWAY_VERSION,
                },
                policy_content=policy.content() if policy else None,
            ),
            request_id,
        )
        log.info(
            "request_rejected",
            task=safe_label(task),
            request_id=request_id,
            error=type(error).__name__,
        )

    # -- stage 4: replay -----------------------------------------------------------------

    def cached_result(self, prepared: Prepared) -> Result | None:
        if prepared.plan.cache_mode != "replay":
            return None
        served = self._served.get(prepared.request_hash) or self._find_served(prepared)
        if served is None:
            return None
        appended = self._append(
            self._draft(
                prepared,
                EventKind.CACHE_HIT,
                {
                    "served_seq": served.seq,
                    "served_request_id": served.request_id,
                    "served_hash": served.hash,
                },
            ),
            prepared.request_id,
        )
        result = self._result(
            prepared, served.response, served.stop_reason, appended.seq, cached=True
        )
        log.info(
            "request_completed",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            seq=appended.seq,
            cached=True,
            latency_ms=0.0,
            tokens=0,
            attempts=0,
        )
        return result

    def _find_served(self, prepared: Prepared) -> Served | None:
        try:
            event = self.store.find_response(prepared.request_hash)
        except AuditStoreError as exc:
            raise AuditWriteError(
                f"the audit database could not be searched for a recorded answer: {exc}",
                request_id=prepared.request_id,
            ) from exc
        if event is None:
            return None
        raw = self._payload(event, "response_body", prepared.request_id)
        response = json.loads(raw)
        served = Served(
            seq=event.seq,
            request_id=event.request_id,
            hash=event.hash,
            stop_reason=event.data.get("stop_reason"),
            response=response,
            size=len(raw),
        )
        self._served.put(prepared.request_hash, served)
        return served

    # -- stage 5-8: intent, attempts, outcome ------------------------------------------

    def record_intent(self, prepared: Prepared, wire: bytes) -> int:
        """Commit the REQUEST event with ``wire``, the exact body bytes about to be sent."""
        plan = prepared.plan
        appended = self._append(
            self._draft(
                prepared,
                EventKind.REQUEST,
                {
                    "provider": plan.provider,
                    "api_version": plan.api_version,
                    "model_id": plan.model_id,
                    "model_version": prepared.model_version,
                    "requested": plan.requested,
                    "effective": plan.effective,
                    "cache_mode": plan.cache_mode,
                    "output_format": plan.output_format,
                    "durability": self.durability,
                    "gateway_version": GATEWAY_VERSION,
                },
                payloads={"request_body": wire},
                with_policy=True,
            ),
            prepared.request_id,
        )
        return appended.seq

    def record_attempt_failed(self, prepared: Prepared, failure: AttemptFailure) -> None:
        self._append(
            self._draft(
                prepared,
                EventKind.ATTEMPT_FAILED,
                # upstream_message may quote the prompt: the audit log may hold that, logs
                # and error messages may not.
                failure.audit_data(),
            ),
            prepared.request_id,
        )

    def record_failed(
        self, prepared: Prepared, error: UpstreamError, *, detail: str | None = None
    ) -> None:
        """Record the FAILED outcome. ``detail`` may quote input, so it goes to the log only."""
        error.request_id = prepared.request_id
        self._append(
            self._draft(
                prepared,
                EventKind.FAILED,
                {
                    "error": type(error).__name__,
                    "status": error.status,
                    "error_type": error.error_type,
                    "upstream_request_id": error.upstream_request_id,
                    "attempts": error.attempts,
                    "reason": error.message,
                    "detail": detail,
                },
            ),
            prepared.request_id,
        )
        log.warning(
            "request_failed",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            status=error.status,
            error_type=error.error_type,
            attempts=error.attempts,
        )

    def record_outcome(self, prepared: Prepared, reply: ProviderReply, wire: bytes) -> Result:
        """Commit the RESPONSE event. ``wire`` is what the intent recorded as about to be sent;
        the event says whether the bytes actually sent were exactly those (invariant 3)."""
        plan = prepared.plan
        sent_as_recorded = reply.request_bytes == wire
        if not sent_as_recorded:
            log.error("wire_mismatch", task=plan.task, request_id=prepared.request_id)
        text = response_text(reply.response)
        stop_reason = reply.response.get("stop_reason")
        check = (
            check_json_output(text, plan.output_schema) if plan.output_format == "json" else None
        )
        data = {
            "ok": check.ok if check else True,
            "status": reply.status,
            "model": reply.response.get("model"),
            "response_id": reply.response.get("id"),
            "stop_reason": stop_reason,
            "usage": reply.response.get("usage") or {},
            "upstream_request_id": reply.upstream_request_id,
            "latency_ms": _finite(reply.latency_ms),
            "attempts": reply.attempts,
            "output_check": check.record() if check else {"checked": False},
            "rate_limits": dict(reply.rate_limits),
            "sent_as_recorded": sent_as_recorded,
        }
        appended = self._append(
            self._draft(
                prepared,
                EventKind.RESPONSE,
                data,
                payloads={
                    "response_body": reply.response_bytes,
                    "request_wire": reply.request_bytes,
                },
            ),
            prepared.request_id,
        )
        if data["ok"] and prepared.plan.cache_mode == "replay":
            self._served.put(
                prepared.request_hash,
                Served(
                    seq=appended.seq,
                    request_id=prepared.request_id,
                    hash=appended.hash,
                    stop_reason=stop_reason,
                    response=reply.response,
                    size=len(reply.response_bytes),
                ),
            )
        usage = reply.response.get("usage") or {}
        log.info(
            "request_completed",
            task=plan.task,
            request_id=prepared.request_id,
            seq=appended.seq,
            cached=False,
            latency_ms=round(reply.latency_ms, 3),
            tokens=_token_total(usage),
            attempts=reply.attempts,
            output_ok=data["ok"],
        )
        if check is not None and not check.ok:
            raise OutputValidationError(
                f"the model's answer for task {plan.task!r} failed the JSON check: "
                f"{check.problem}. The answer is recorded at seq {appended.seq}, flagged.",
                request_id=prepared.request_id,
                seq=appended.seq,
            )
        return self._result(
            prepared, reply.response, stop_reason, appended.seq, cached=False, checked=check
        )

    # -- helpers ---------------------------------------------------------------------------

    def _draft(
        self,
        prepared: Prepared,
        kind: EventKind,
        data: dict[str, Any],
        *,
        payloads: Mapping[str, bytes] | None = None,
        with_policy: bool = False,
    ) -> EventDraft:
        return EventDraft(
            kind=kind,
            request_id=prepared.request_id,
            task=prepared.plan.task,
            caller=prepared.caller,
            policy_fingerprint=prepared.policy.fingerprint,
            request_hash=prepared.request_hash,
            data=data,
            payloads=dict(payloads or {}),
            policy_content=prepared.policy.content() if with_policy else None,
        )

    def _append(self, draft: EventDraft, request_id: str) -> Appended:
        try:
            return self.store.append(draft)
        except AuditStoreError as exc:
            raise AuditWriteError(
                f"the audit record ({draft.kind}) could not be committed, so the gateway "
                f"stopped: {exc.message}",
                request_id=request_id,
                hint="Nothing was sent upstream after this point. Fix the audit database "
                "and retry.",
            ) from exc

    def _payload(self, event: StoredEvent, name: str, request_id: str) -> bytes:
        try:
            return self.store.payload(event.payload_digests[name])
        except (AuditStoreError, KeyError) as exc:
            raise AuditWriteError(
                f"the recorded {name} of seq {event.seq} could not be read.",
                request_id=request_id,
                hint="Run 'gateway audit verify'.",
            ) from exc

    def _result(
        self,
        prepared: Prepared,
        response: Mapping[str, Any],
        stop_reason: str | None,
        seq: int,
        *,
        cached: bool,
        checked: OutputCheck | None = None,
    ) -> Result:
        """``checked``: the JSON check already run on this answer, so it is not parsed twice."""
        text = response_text(response)
        value = None
        if prepared.plan.output_format == "json":
            value = (checked or check_json_output(text, None)).value
        return Result(
            text=text,
            json=value,
            request_id=prepared.request_id,
            request_hash=prepared.request_hash,
            seq=seq,
            cached=cached,
            model=str(response.get("model") or prepared.plan.model_id),
            usage=dict(response.get("usage") or {}),
            policy_fingerprint=prepared.policy.fingerprint,
            stop_reason=stop_reason,
        )


def _finite(value: float) -> float:
    return round(value, 3) if math.isfinite(value) else -1.0


def _token_total(usage: Mapping[str, Any]) -> int:
    return sum(v for k, v in usage.items() if k.endswith("tokens") and isinstance(v, int))


def _json_safe_overrides(overrides: object) -> Any:
    """The caller's requested overrides as recordable JSON, or a note when they are not JSON."""
    if overrides is None:
        return {}
    try:
        canonical_digest(overrides)
    except (ValueError, TypeError):
        return {"unrecordable": safe_label(repr(overrides))[:200]}
    return overrides
