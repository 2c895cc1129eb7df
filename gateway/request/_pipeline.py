"""The stages of one request that do not depend on how the caller waits (DESIGN.md §3).

``Gateway`` and ``AsyncGateway`` drive these stages in order; every event goes through the one
recorder (_recording), so both clients record exactly the same events:

    prepared = pipeline.prepare(Request("compliance_review", prompt="...", caller="svc"))
    served = pipeline.cache.lookup(prepared)                     # replay mode only
    result = pipeline.records.cache_hit(prepared, served)        # a hit: CACHE_HIT
    sent = recorder.send(prepared.labels, provider, prepared.body, api_version=...,
                         intent=pipeline.records.intent(prepared))
    result = pipeline.records.record_outcome(prepared, sent.reply, sent.wire)
    tokens = pipeline.count_tokens("compliance_review", prompt="...", caller="payments-svc")

The call's own events (intent, outcome, hit, refusal) are built by _call_records, which
offers each answer to the replay cache (_served); the types the stages hand each other
are in _prepared.

A streamed request is prepared with ``stream=True``: its wire body is the plan's with
``"stream": true`` (recorded exactly), its request hash the plan's (the replay key does not
depend on how the answer is delivered; docs/gateway.md says why).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn, overload

from pydantic import SecretStr

from audit import EventKind
from audit.canonical import canonical_bytes
from gateway._attachment_payloads import stored_payloads
from gateway._attachments import attachments
from gateway._inputs import (
    EXPERIMENT_CALLER,
    check_caller,
    check_name,
    check_overrides,
    messages_from_input,
)
from gateway._keys import (
    GATEWAY_VERSION,
    new_request_id,
    plain_request_hash,
    request_hash_for,
)
from gateway._log import log
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import (
    GatewayError,
    InputError,
    PolicyError,
    PolicyLoadError,
    PolicyNotApproved,
    PolicyViolation,
    UpstreamError,
)
from gateway.keys import forwarded_user_id, subject_tag
from gateway.policy import (
    Plan,
    Policy,
    PolicySet,
    chosen_model,
    plan_request,
    planning_day,
    transported,
)
from gateway.providers.base import WireTarget
from gateway.providers.registry import Providers, runs_offline
from gateway.request._admitted import AdmittedMemo
from gateway.request._call_records import CallRecords
from gateway.request._call_types import unannounced
from gateway.request._prepared import Prepared, Refusal, Request
from gateway.request._recording import Recorder
from gateway.request._served import ReplayCache

__all__ = ["RequestPipeline"]

# Policies whose canonical content the pipeline keeps (experiments derive many).
_POLICY_BYTES_LIMIT = 256


class RequestPipeline:
    """Resolve, plan and key a request (REJECTED for a refusal), count tokens. ``records``:
    the call's own events (:class:`_call_records.CallRecords`); ``cache``: the replay
    cache they offer answers to and hits are looked up in (:class:`_served.ReplayCache`)."""

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
        self._policy_bytes: dict[str, bytes] = {}
        self._admitted = AdmittedMemo()
        self.cache = ReplayCache(recorder)
        self.records = CallRecords(
            recorder, self.cache, durability=durability, policy_bytes=self.policy_bytes
        )

    # -- stage 1-3: resolve, plan, key ---------------------------------------------------

    def prepare(self, request: Request) -> Prepared:
        """The request checked, planned and keyed; a refused one is recorded REJECTED and
        its error raised."""
        admitted = self.admit(request)
        if isinstance(admitted, Refusal):
            self.refuse(admitted)
        return admitted

    @overload
    def admit(self, request: Request) -> Prepared | Refusal: ...
    @overload
    def admit(self, request: Request, *, versions: bool) -> Prepared | Refusal | None: ...

    def admit(self, request: Request, *, versions: bool = True) -> Prepared | Refusal | None:
        """:meth:`prepare` without the audit write: the prepared request, or the refusal to
        record (:meth:`refuse`), so that an asyncio caller can plan on its event loop and
        hand only the write to a worker thread. With ``versions=False``, None for a request
        whose model has a version beyond its id (finding it is not mere CPU work: a local
        model is built on first use), for the caller to admit elsewhere. A request repeated
        exactly under a replay policy is planned once (_admitted)."""
        memoised = self._memoised(request)
        if memoised is None:
            return self._admit(request, versions=versions)
        key, own = memoised
        # The days a policy's effective date and a model's retirement are checked against.
        day = (self.policies.today(), planning_day())
        known = self._admitted.get(key, day)
        if known is not None:
            return AdmittedMemo.again(known, new_request_id())
        admitted = self._admit(own, versions=versions)
        if isinstance(admitted, Prepared) and not self.providers.versioned(admitted.model.provider):
            self._admitted.put(key, admitted, day)
        return admitted

    def _memoised(self, request: Request) -> tuple[bytes, Request] | None:
        """The memo key of a request under a ``replay`` policy that nothing derives (a
        transform may vary what it derives), and the copy to plan it from."""
        if self._policy_transform is not None or not isinstance(request.task, str):
            return None
        try:
            policy = self.policies.get(request.task)
        except GatewayError:
            return None  # refused as it is admitted, and recorded so
        if policy.cache.mode != "replay":
            return None
        return AdmittedMemo.key(request)

    def _admit(self, request: Request, *, versions: bool) -> Prepared | Refusal | None:
        task, caller, overrides = request.task, request.caller, request.overrides
        request_id = new_request_id()
        policy: Policy | None = None
        try:
            # Only a gateway deriving its policies (the experiment runner) may use the
            # experiment caller; its records carry the derived policy's label too.
            checked_caller = check_caller(caller, experiment=self._derives_policies)
            overrides = check_overrides(overrides)
            timeout_s = _check_timeout(request.timeout)
            tag, tag_key = self._subject_tag(request.subject)
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
            if not request.counting:
                _check_stream_mode(policy, request.stream)
            model_id, overrides = chosen_model(policy, overrides)
            model = self.catalog.get(model_id)
            if model is None:  # review refuses such a policy; this guards an edited catalog
                raise PolicyError(f"model {model_id!r} is not in the model catalog.")
            model = transported(model, policy, self.providers.region)  # transport, id, region
            if not versions and self.providers.versioned(model.provider):
                return None
            checked_caller = checked_caller or self.default_caller
            if checked_caller is None and not runs_offline(model.provider):
                raise InputError(
                    f"task {task!r} calls {model.id}, so the request must name its caller.",
                    hint="Pass caller='<calling service>' (gateway ask --caller NAME), or set "
                    "GATEWAY_DEFAULT_CALLER for a service with one identity.",
                )
            plan = self._plan(policy, model, request, overrides, checked_caller)
            model_version = self.providers.model_version(model.provider, model.id)
        except (PolicyError, InputError) as exc:
            exc.request_id = request_id  # the refusal names its REJECTED record
            if isinstance(exc, PolicyNotApproved):  # the refused version, on the record
                entry = self.policies.entry(exc.task)
                policy = entry.policy if entry is not None else policy
            return Refusal(exc, request, policy, overrides)
        return Prepared(
            request_id=request_id,
            caller=checked_caller,
            policy=policy,
            model=model,
            plan=plan,
            request_hash=request_hash_for(plan, model_version, self.recorder.cache_key),
            plain_hash=plain_request_hash(plan, model_version),
            subject_tag=tag,
            subject_key=tag_key,
            model_version=model_version,
            stream=request.stream,
            timeout_s=timeout_s,
        )

    def _subject_tag(self, subject: object) -> tuple[str | None, str | None]:
        """The keyed digest ``subject`` is recorded as and the id of the key it is keyed
        under, or Nones; InputError for a subject that is not a plain name, or when there is
        no cache key to key it under."""
        name = check_name(subject, "subject", example="customer-118204")
        if name is None:
            return None, None
        key = self.recorder.cache_key
        if key is None:
            raise InputError(
                "a request's subject is recorded as a keyed digest, and this deployment has "
                "no cache key to key it under.",
                hint="Set GATEWAY_CACHE_KEY_FILE (docs/security.md), or leave subject out.",
            )
        return subject_tag(key, name), key.key_id

    def _plan(
        self,
        policy: Policy,
        model: ModelInfo,
        request: Request,
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
            messages_from_input(request.prompt, request.messages),
            overrides=overrides,
            caller=caller,
            user_id=user_id,
        )

    def refuse(self, refusal: Refusal) -> NoReturn:
        """Record the REJECTED event of a refused request, then raise its error."""
        error = refusal.error
        assert error.request_id is not None
        self.records.rejected(
            error.request_id,
            refusal.request.task,
            refusal.request.caller,
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

    # -- a token count: a pre-flight check, not a model call -----------------------------

    def count_tokens(
        self, task: str, *, prompt: object = None, messages: object = None, caller: object = None
    ) -> int:
        """The input tokens the provider counts for the request ``task`` would send (the
        policy's system prompt and tools included), through the provider's counting endpoint.

        Nothing is generated, but the request's content goes to the provider, so a
        TOKEN_COUNT event (``model_call: false``, the exact bytes sent to count as its
        ``request_body``) is committed before they are sent, from the provider's ``on_wire``
        as an intent is; the count is returned, not recorded (an estimate, not evidence). A
        request the policy refuses is recorded REJECTED."""
        prepared = self.prepare(
            Request(task, prompt=prompt, messages=messages, caller=caller, counting=True)
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
        policy_canonical = self.policy_bytes(prepared.policy)
        recorded: list[bytes] = []

        def on_wire(wire: bytes, *, target: WireTarget | None = None) -> None:
            # What the counting endpoint is sent is a part of the planned body (its input
            # fields), so it is recorded from the request the provider built, not planned.
            self.recorder.append(
                prepared.labels.draft(
                    EventKind.TOKEN_COUNT,
                    data if target is None else {**data, "target": target.audit_data()},
                    payloads=stored_payloads("request_body", wire),
                    policy_canonical=policy_canonical,
                )
            )
            recorded.append(wire)

        try:
            counted = provider.count_tokens(
                plan.body, api_version=plan.api_version, on_wire=on_wire
            )
        except UpstreamError as exc:
            exc.request_id = prepared.request_id
            raise
        if not recorded:
            raise unannounced(provider.name, prepared.request_id)
        log.info("tokens_counted", task=plan.task, request_id=prepared.request_id)
        return counted


def _check_stream_mode(policy: Policy, stream: bool) -> None:
    if stream and policy.output.stream == "never":
        raise PolicyViolation(
            f"the policy for task {policy.task!r} does not let its answers be streamed "
            '([output] stream = "never").',
            key="stream",
        )
    if not stream and policy.output.stream == "must":
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
