"""The stages of one request that do not depend on how the caller waits (DESIGN.md §3).

``Gateway`` and ``AsyncGateway`` drive these stages in order; every event goes through the one
recorder (gateway._recording), so both clients record exactly the same events:

    prepared = pipeline.prepare("compliance_review", prompt="...", caller="payments-svc")
    result = pipeline.cached_result(prepared)              # replay mode only
    sent = recorder.send(prepared.labels, provider, prepared.plan.body,
                         api_version=..., intent=pipeline.intent(prepared))
    result = pipeline.record_outcome(prepared, sent.reply, sent.wire)   # or record_failed
    pipeline.record_cancelled(prepared, reason="cancelled")           # the caller left
    tokens = pipeline.count_tokens("compliance_review", prompt="...", caller="payments-svc")

A streamed request is prepared with ``stream=True``: its wire body is the plan's with
``"stream": true`` (recorded exactly), its request hash the plan's (the replay key does not
depend on how the answer is delivered; docs/gateway.md says why).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import SecretStr

from audit import EventKind
from audit.canonical import canonical_bytes, canonical_digest
from gateway._answer_checks import answer_alerts, answer_facts
from gateway._attachment_payloads import stored_payloads
from gateway._attachments import attachments
from gateway._inputs import (
    EXPERIMENT_CALLER,
    check_bounded,
    check_caller,
    check_overrides,
    messages_from_input,
    safe_label,
)
from gateway._keys import GATEWAY_VERSION, new_request_id, request_hash_for
from gateway._log import log
from gateway._output_check import OutputCheck, check_json_output, response_text
from gateway._recording import CallLabels, Intent, Recorder, answer_alerted
from gateway._replayable import outside_world
from gateway._served import Served, ServedMemo, recorded_message
from gateway._user_id import forwarded_user_id
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import (
    AuditWriteError,
    GatewayError,
    InputError,
    OutputValidationError,
    PolicyError,
    PolicyLoadError,
    PolicyViolation,
    UpstreamError,
)
from gateway.policy import Plan, Policy, PolicySet, plan_request
from gateway.providers._stream import MessageAssembler
from gateway.providers.base import ProviderReply
from gateway.providers.registry import Providers, runs_offline
from gateway.result import Result, answer_blocks


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
    stream: bool = False
    timeout_s: float | None = None
    labels: CallLabels = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = CallLabels(
            request_id=self.request_id,
            task=self.plan.task,
            caller=self.caller,
            policy_fingerprint=self.policy.fingerprint,
            request_hash=self.request_hash,
        )
        object.__setattr__(self, "labels", labels)

    @property
    def body(self) -> dict[str, Any]:
        """The wire body: the plan's, with ``"stream": true`` for a streamed request."""
        return {**self.plan.body, "stream": True} if self.stream else self.plan.body


@dataclass(frozen=True)
class Refusal:
    """A request its policy or its input refused (the error names the request id), to be
    recorded REJECTED by :meth:`RequestPipeline.refuse`."""

    error: PolicyError | InputError
    task: object
    caller: object
    policy: Policy | None
    overrides: object


_POLICY_BYTES_LIMIT = 256


class RequestPipeline:
    def __init__(
        self,
        *,
        policies: PolicySet,
        catalog: Catalog,
        recorder: Recorder,
        providers: Providers,
        durability: str,
        default_caller: str | None = None,
        policy_transform: Any = None,
        user_id_salt: SecretStr | None = None,
        derives_policies: bool = False,
    ) -> None:
        self.policies = policies
        self.catalog = catalog
        self.recorder = recorder
        self.providers = providers
        self.durability = durability
        self.default_caller = check_caller(default_caller)
        self._policy_transform = policy_transform
        # A caller-supplied policy transform (the experiment runner's), not offline mode's.
        self._derives_policies = derives_policies
        self._user_id_salt = user_id_salt
        self._served = ServedMemo()
        self._policy_bytes: dict[str, bytes] = {}

    # -- stage 1-3: resolve, plan, key ---------------------------------------------------

    def prepare(
        self,
        task: str,
        *,
        prompt: object = None,
        messages: object = None,
        caller: object = None,
        overrides: Mapping[str, object] | None = None,
        stream: bool = False,
        timeout: object = None,
        counting: bool = False,
    ) -> Prepared:
        """``counting``: planned for a token count, not a call (so no delivery mode applies).
        A refused request is recorded REJECTED and its error raised."""
        admitted = self.admit(
            task,
            prompt=prompt,
            messages=messages,
            caller=caller,
            overrides=overrides,
            stream=stream,
            timeout=timeout,
            counting=counting,
        )
        if isinstance(admitted, Refusal):
            self.refuse(admitted)
        return admitted

    def admit(
        self,
        task: str,
        *,
        prompt: object = None,
        messages: object = None,
        caller: object = None,
        overrides: Mapping[str, object] | None = None,
        stream: bool = False,
        timeout: object = None,
        counting: bool = False,
    ) -> Prepared | Refusal:
        """:meth:`prepare` without the audit write: the prepared request, or the refusal to
        record (:meth:`refuse`), so that an asyncio caller can plan on its event loop and
        hand only the write to a worker thread."""
        request_id = new_request_id()
        policy: Policy | None = None
        try:
            # Only a gateway deriving its policies (the experiment runner) may use the
            # experiment caller; its records carry the derived policy's label too.
            checked_caller = check_caller(caller, experiment=self._derives_policies)
            overrides = check_overrides(overrides)
            timeout_s = _check_timeout(timeout)
            policy = self.policies.get(task)
            self.policies.check_in_effect(policy)  # before its effective_date: refused
            if self._policy_transform is not None:
                policy = self._policy_transform(policy)
            if checked_caller == EXPERIMENT_CALLER and policy.derived is None:
                # A transform that derives nothing (an identity) would otherwise hide
                # production requests among the samples under the task's own fingerprint.
                raise InputError(
                    f"caller {EXPERIMENT_CALLER!r} is reserved for requests under a derived "
                    f"policy (`gateway experiment` samples); task {task!r} is not derived here.",
                    hint="Name the service itself, such as 'payments-svc'.",
                )
            if not counting:
                _check_stream_mode(policy, stream)
            model = self.catalog.get(policy.model_id)
            if model is None:  # review refuses such a policy; this guards an edited catalog
                raise PolicyError(f"model {policy.model_id!r} is not in the model catalog.")
            checked_caller = checked_caller or self.default_caller
            if checked_caller is None and not runs_offline(model.provider):
                raise InputError(
                    f"task {task!r} calls {model.id}, so the request must name its caller.",
                    hint="Pass caller='<calling service>' (gateway ask --caller NAME), or set "
                    "GATEWAY_DEFAULT_CALLER for a service with one identity.",
                )
            plan = self._plan(policy, model, prompt, messages, overrides, checked_caller)
            model_version = self.providers.model_version(model.provider, model.id)
        except (PolicyError, InputError) as exc:
            exc.request_id = request_id  # the refusal names its REJECTED record
            return Refusal(exc, task, caller, policy, overrides)
        return Prepared(
            request_id=request_id,
            caller=checked_caller,
            policy=policy,
            model=model,
            plan=plan,
            request_hash=request_hash_for(plan, model_version),
            model_version=model_version,
            stream=stream,
            timeout_s=timeout_s,
        )

    def _plan(
        self,
        policy: Policy,
        model: ModelInfo,
        prompt: object,
        messages: object,
        overrides: Mapping[str, object] | None,
        caller: str | None,
    ) -> Plan:
        user_id = None
        if policy.caller.forward_user_id:
            user_id = forwarded_user_id(caller, salt=self._user_id_salt)
            if user_id is None:
                raise PolicyLoadError(
                    f"the policy for task {policy.task!r} forwards a caller identifier "
                    "([caller] forward_user_id = true), but the gateway has none for this "
                    "request: it needs a caller name and the deployment's GATEWAY_USER_ID_SALT.",
                    hint="Set GATEWAY_USER_ID_SALT (a long random secret, kept like a key) and "
                    "name the caller.",
                )
        return plan_request(
            policy,
            model,
            messages_from_input(prompt, messages),
            overrides=overrides,
            caller=caller,
            user_id=user_id,
        )

    def refuse(self, refusal: Refusal) -> NoReturn:
        """Record the REJECTED event of a refused request, then raise its error."""
        error = refusal.error
        assert error.request_id is not None
        self._record_rejected(
            error.request_id,
            refusal.task,
            refusal.caller,
            refusal.policy,
            refusal.overrides,
            error,
        )
        raise error

    def policy_bytes(self, policy: Policy) -> bytes:
        """The canonical bytes of ``policy``'s content, computed once per policy: keyed by
        its fingerprint, the digest of exactly these bytes, so no two contents share a key."""
        fingerprint = policy.fingerprint
        known = self._policy_bytes.get(fingerprint)
        if known is None:
            if len(self._policy_bytes) >= _POLICY_BYTES_LIMIT:
                self._policy_bytes = {}  # experiments derive many: a cache, not a record
            known = canonical_bytes(policy.content())
            self._policy_bytes[fingerprint] = known
        return known

    def _record_rejected(
        self,
        request_id: str,
        task: object,
        caller: object,
        policy: Policy | None,
        overrides: object,
        error: GatewayError,
    ) -> None:
        shown_caller = safe_label(caller) if caller is not None else None
        claimed = None
        if shown_caller == EXPERIMENT_CALLER and (policy is None or policy.derived is None):
            # A refusal recorded under the reserved name would be left out of `audit list`
            # like an experiment sample: the attempt is listed, the claimed name kept in data.
            shown_caller, claimed = None, EXPERIMENT_CALLER
        labels = CallLabels(
            request_id=request_id,
            task=safe_label(task),
            caller=shown_caller,
            policy_fingerprint=policy.fingerprint if policy else None,
            request_hash=None,
        )
        self.recorder.append(
            labels.draft(
                EventKind.REJECTED,
                {
                    "error": type(error).__name__,
                    "key": getattr(error, "key", None),
                    "reason": safe_label(error.message),
                    "requested": _json_safe_overrides(overrides),
                    "gateway_version": GATEWAY_VERSION,
                    **({"claimed_caller": claimed} if claimed else {}),
                },
                policy_canonical=self.policy_bytes(policy) if policy else None,
            )
        )
        log.info(
            "request_rejected",
            task=safe_label(task),
            request_id=request_id,
            error=type(error).__name__,
        )

    # -- a token count: a pre-flight check, not a model call -----------------------------

    def count_tokens(
        self, task: str, *, prompt: object = None, messages: object = None, caller: object = None
    ) -> int:
        """The input tokens the provider counts for the request ``task`` would send (the
        policy's system prompt and tools included), through the provider's counting endpoint.

        Nothing is generated, but the request's content goes to the provider, so a
        TOKEN_COUNT event (``model_call: false``, the planned body as its ``request_body``)
        is committed before it is sent, as an intent is; the count is returned, not recorded
        (an estimate, not evidence). A request the policy refuses is recorded REJECTED."""
        prepared = self.prepare(
            task, prompt=prompt, messages=messages, caller=caller, counting=True
        )
        plan = prepared.plan
        provider = self.providers.get(prepared.model.provider)
        data: dict[str, Any] = {
            "model_call": False,
            "provider": plan.provider,
            "api_version": plan.api_version,
            "model_id": plan.model_id,
            "model_version": prepared.model_version,
            "gateway_version": GATEWAY_VERSION,
        }
        files = attachments(plan.body.get("messages"))
        if files:
            data["attachments"] = files
        self.recorder.append(
            prepared.labels.draft(
                EventKind.TOKEN_COUNT,
                data,
                payloads=stored_payloads("request_body", provider.wire_bytes(plan.body)),
                policy_canonical=self.policy_bytes(prepared.policy),
            )
        )
        try:
            counted = provider.count_tokens(plan.body, api_version=plan.api_version)
        except UpstreamError as exc:
            exc.request_id = prepared.request_id
            raise
        log.info("tokens_counted", task=plan.task, request_id=prepared.request_id)
        return counted

    # -- stage 4: replay -----------------------------------------------------------------

    def cached_result(self, prepared: Prepared) -> Result | None:
        hit = self.cached_hit(prepared)
        return hit[0] if hit is not None else None

    def cached_hit(self, prepared: Prepared) -> tuple[Result, Mapping[str, Any]] | None:
        """A replay hit: its Result and the recorded message it serves (which a streamed
        request streams as events); ``None`` on a miss or outside replay mode."""
        if prepared.plan.cache_mode != "replay" or outside_world(prepared.policy):
            return None  # an answer that depended on the outside world is never replayed
        served = self._served.get(prepared.request_hash) or self._find_served(prepared)
        if served is None:
            return None
        hit_data: dict[str, Any] = {
            "served_seq": served.seq,
            "served_request_id": served.request_id,
            "served_hash": served.hash,
        }
        if prepared.stream:
            hit_data["stream"] = True
        appended = self.recorder.append(prepared.labels.draft(EventKind.CACHE_HIT, hit_data))
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
        return result, served.response

    def _find_served(self, prepared: Prepared) -> Served | None:
        event = self.recorder.find_response(prepared.request_hash, prepared.labels)
        if event is None:
            return None
        raw = self.recorder.payload(event, "response_body", prepared.request_id)
        response = recorded_message(raw)
        if response is None:
            raise AuditWriteError(
                f"the recorded answer at seq {event.seq} is not a readable message, so it was "
                "not served.",
                request_id=prepared.request_id,
                hint="Run 'gateway audit verify'.",
            )
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

    def intent(self, prepared: Prepared) -> Intent:
        """The REQUEST event committed before the call (the recorder adds the wire bytes)."""
        plan = prepared.plan
        # Only a streamed or time-limited request says so, so other requests record what
        # they always did.
        delivery: dict[str, Any] = {}
        if prepared.stream:
            delivery["stream"] = True
        if prepared.timeout_s is not None:
            delivery["timeout_s"] = prepared.timeout_s
        # Each image and document by digest, media type and size (its bytes are in the body).
        files = attachments(plan.body.get("messages"))
        if files:
            delivery["attachments"] = files
        return Intent(
            EventKind.REQUEST,
            {
                **delivery,
                "provider": plan.provider,
                "api_version": plan.api_version,
                "model_id": plan.model_id,
                "model_version": prepared.model_version,
                "requested": plan.requested,
                "effective": plan.effective,
                "cache_mode": plan.cache_mode,
                "key_scope": plan.key_scope,
                # A derived policy (experiment, offline) names itself and the reviewed one.
                "derived": prepared.policy.derived.model_dump()
                if prepared.policy.derived
                else None,
                "output_format": plan.output_format,
                **_replayability(prepared.policy),
                "durability": self.durability,
                "gateway_version": GATEWAY_VERSION,
            },
            policy_canonical=self.policy_bytes(prepared.policy),
        )

    def record_failed(
        self,
        prepared: Prepared,
        error: UpstreamError,
        *,
        detail: str | None = None,
        partial: MessageAssembler | None = None,
    ) -> None:
        """Record the FAILED outcome. ``detail`` may quote input: it goes to the audit record,
        never to a log or an error message. ``partial``: what a stream delivered first."""
        error.request_id = prepared.request_id
        data: dict[str, Any] = {
            "error": type(error).__name__,
            "status": error.status,
            "error_type": error.error_type,
            "upstream_request_id": error.upstream_request_id,
            "attempts": error.attempts,
            "reason": error.message,
            "detail": detail,
        }
        payloads: dict[str, bytes] = {}
        if partial is not None:
            data["partial"], payloads = _partial(partial)
        self.recorder.append(prepared.labels.draft(EventKind.FAILED, data, payloads=payloads))
        log.warning(
            "request_failed",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            status=error.status,
            error_type=error.error_type,
            attempts=error.attempts,
        )

    def record_cancelled(
        self,
        prepared: Prepared,
        *,
        reason: str,
        partial: MessageAssembler | None = None,
        reply: ProviderReply | None = None,
    ) -> None:
        """Record the CANCELLED outcome: the caller left (closed a stream early, was cancelled,
        timed out or interrupted) before the answer was recorded. ``partial`` is what a stream
        delivered; ``reply`` the whole answer when it had arrived (``answered`` says which)."""
        data: dict[str, Any] = {"reason": reason, "answered": reply is not None}
        payloads: dict[str, bytes] = {}
        if partial is not None:
            data["partial"], payloads = _partial(partial)
        if reply is not None:
            data["usage"] = reply.response.get("usage") or {}
            data["upstream_request_id"] = reply.upstream_request_id
            data["stop_reason"] = reply.response.get("stop_reason")
            payloads = {"response_body": reply.response_bytes}
        self.recorder.append(prepared.labels.draft(EventKind.CANCELLED, data, payloads=payloads))
        log.warning(
            "request_cancelled",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            reason=reason,
            answered=reply is not None,
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
        if reply.response.get("stop_details") is not None:
            data["stop_details"] = reply.response["stop_details"]
        # What the answer says about itself (model, region, tier, thinking, server edits),
        # and where it differs from the policy: alerts, in the RESPONSE itself (one commit
        # with the answer) and each as an ANSWER_ALERT event that names it (to be found).
        data.update(answer_facts(plan, reply.response))
        alerts = answer_alerts(plan, reply.response)
        if alerts:
            data["alerts"] = alerts
        if reply.stream is not None:
            # The response body is the assembled message (what replay serves); the event
            # stream itself is recorded by the digest of its bytes as received.
            data["stream"] = reply.stream.model_dump(mode="json")
        appended = self.recorder.append(
            prepared.labels.draft(
                EventKind.RESPONSE,
                data,
                payloads={
                    "response_body": reply.response_bytes,
                    **stored_payloads("request_wire", reply.request_bytes),
                },
            )
        )
        for alert in alerts:
            self.recorder.append(
                prepared.labels.draft(
                    EventKind.ANSWER_ALERT, {**alert, "response_seq": appended.seq}
                )
            )
            log.warning(
                "answer_alert",
                task=plan.task,
                request_id=prepared.request_id,
                check=alert["check"],
                seq=appended.seq,
            )
        if data["ok"] and not answer_alerted(data) and prepared.plan.cache_mode == "replay":
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
        blocks, tool_uses = answer_blocks(response)
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
            stop_sequence=_stop_sequence(response),
            content=blocks,
            tool_uses=tool_uses,
        )


def _stop_sequence(response: Mapping[str, Any]) -> str | None:
    stop = response.get("stop_sequence")
    return stop if isinstance(stop, str) else None


def _replayability(policy: Policy) -> dict[str, str]:
    """``not_replayable``: why this request's answer cannot be replayed; absent when it can."""
    reason = outside_world(policy)
    return {"not_replayable": reason} if reason else {}


def _check_stream_mode(policy: Policy, stream: bool) -> None:
    if stream and policy.stream == "never":
        raise PolicyViolation(
            f"the policy for task {policy.task!r} does not let its answers be streamed "
            '([output] stream = "never").',
            key="stream",
        )
    if not stream and policy.stream == "must":
        raise PolicyViolation(
            f"the policy for task {policy.task!r} requires its answers to be streamed "
            '([output] stream = "must"); use Gateway.stream (gateway ask --stream).',
            key="stream",
        )


def _check_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise InputError(
            "timeout must be a positive number of seconds.", hint="For example timeout=30."
        )
    return float(timeout)


def _partial(partial: MessageAssembler) -> tuple[dict[str, Any], dict[str, bytes]]:
    """What a stream delivered before it ended: the text and last usage in the event's data,
    the partial message as a payload."""
    data = {
        "text": partial.text(),
        "usage": dict(partial.usage),
        "events": partial.event_count,
        "stop_reason": partial.stop_reason,
    }
    message = partial.message()
    payloads = {} if message is None else {"partial_response": _json_bytes(message)}
    return data, payloads


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _finite(value: float) -> float:
    return round(value, 3) if math.isfinite(value) else -1.0


def _token_total(usage: Mapping[str, Any]) -> int:
    return sum(v for k, v in usage.items() if k.endswith("tokens") and isinstance(v, int))


def _json_safe_overrides(overrides: object) -> Any:
    """The caller's requested overrides as recordable JSON, or a note when they are not JSON."""
    if overrides is None:
        return {}
    try:
        check_bounded(overrides, "overrides")  # before repr or canonical form: both recurse
    except InputError:
        return {"unrecordable": "nested too deep or too large to record"}
    try:
        canonical_digest(overrides)
    except (ValueError, TypeError):
        return {"unrecordable": safe_label(repr(overrides))[:200]}
    return overrides
