"""Planning: a policy, a model, the caller's messages and overrides become the exact wire body.

    plan = plan_request(policy, catalog.get(policy.model.id), [{"role": "user", "content": "..."}])
    plan.body          # exactly what the provider sends
    plan.request_hash  # the replay-cache key: sha256(JCS({provider, api_version, body, scope}))

The key's scope: under the default ``[cache] scope = "caller"`` the caller's identity is part
of the key, so no caller is served (or learns of) another caller's recorded answer; a derived
policy's label is part of it too, so an experiment never shares the task's replay cache.

Nothing is dropped silently: a setting the model cannot honour raises PolicyLoadError, a
caller override outside the policy's [caller] table raises PolicyViolation. Some request fields
are never a caller's (:data:`RESERVED`): server-side ``fallbacks`` would let another model than
the pinned one answer, and ``inference_geo`` is the policy's to set; ``context_management``
edits (which change what the model saw after the request was recorded) and ``metadata`` are
the policy's unless its ``[caller]`` table opens them. The parts a caller brings under an
opened contract (its system prompt, tools, schema, thinking, ...) are checked in
``gateway.policy._contract`` and go on the wire as sent; a ``max_tokens`` above a capping
range is lowered to its maximum, and the plan says so (``capped``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from audit.canonical import canonical_digest
from gateway.catalog import ModelInfo
from gateway.errors import InputError, PolicyLoadError, PolicyViolation
from gateway.policy._content import check_messages
from gateway.policy._contract import CallerParts, caller_parts, check_system_size, is_opened
from gateway.policy._findings import Finding, Severity
from gateway.policy._requested import in_body, shown_override
from gateway.policy._schema import CallerChoice, CallerRange, Generation, Policy, TokenRange
from gateway.policy.rules import Subject, check
from gateway.policy.rules.caller import INTEGER_KEYS
from gateway.providers.base import BETAS_FIELD
from gateway.providers.registry import capabilities

BYTES_PER_TOKEN = 4  # a deliberately rough estimate, only to refuse obviously oversized input

# Request fields no caller override may set, each with why and the policy key that governs it.
RESERVED: dict[str, tuple[str, str]] = {
    "fallbacks": (
        "model.id",
        "server-side fallbacks would let another model than the pinned {model!r} answer",
    ),
    "context_management": (
        "context_management",
        "context editing would change what the model read after the request was recorded; "
        "no policy setting allows it yet",
    ),
    "inference_geo": (
        "model.inference_geo",
        "where inference runs is the policy's ([model] inference_geo)",
    ),
    "cache_control": (
        "prompt.cache",
        "prompt caching is the policy's: [prompt] cache puts the breakpoint on its system "
        "prompt (or last tool), the form every transport takes; a top-level cache_control "
        "(automatic caching) is refused by Bedrock and Vertex",
    ),
    "metadata": (
        "caller.forward_user_id",
        "metadata.user_id is set by the gateway when the policy forwards a caller identifier "
        "([caller] forward_user_id)",
    ),
}

# A policy with tools sends its own definitions and choice: a caller's different ones are
# refused naming the policy key that sets them (a front end drops identical ones).
POLICY_TOOL_KEYS = {"tools": "tools.file", "tool_choice": "tools.choice"}


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    provider: str  # a name in the provider registry
    model_id: str
    api_version: str
    body: dict[str, Any]
    cache_mode: Literal["replay", "record"]
    output_format: Literal["text", "json"]
    output_schema: dict[str, Any] | None
    # The caller's tool whose input is the answer's output (a forced tool under [caller]
    # output), checked against the tool's input_schema; None: the answer's text is checked.
    output_tool: str | None = None
    requested: dict[str, Any]
    # The caller parts the body holds exactly as sent, and where (gateway.policy._requested):
    # the REQUEST records these once, in its request_body payload.
    in_body: dict[str, tuple[str | int, ...]] = {}
    effective: dict[str, Any]
    # Values lowered to the policy's ceiling (``[caller] max_tokens`` with over = "cap").
    capped: dict[str, int] = {}
    policy_fingerprint: str
    key_scope: dict[str, str]  # what besides the wire request keys it (caller, derivation)
    request_hash: str


def plan_request(
    policy: Policy,
    model: ModelInfo,
    messages: list[dict[str, Any]],
    *,
    overrides: Mapping[str, object] | None = None,
    caller: str | None = None,
    user_id: str | None = None,
) -> Plan:
    """``user_id``: the caller identifier forwarded as ``metadata.user_id`` under
    ``[caller] forward_user_id = true`` (see gateway.keys), never the caller's name.
    Without one the body has no ``metadata`` (a template, as ``policy show`` prints it); the
    gateway refuses to send such a task's request without one."""
    requested = dict(overrides or {})
    generation, brought, capped = _apply_overrides(policy, requested)
    parts = caller_parts(policy, model, brought)
    if parts.thinking is not None:
        generation = generation.model_copy(update={"thinking": parts.thinking})
    _refuse_unhonoured(policy, model, generation, requested)
    thinking = generation.thinking
    checked = check_messages(
        messages,
        policy,
        tool_names=parts.tool_names if parts.tools is not None else None,
        thinking=thinking is not None and thinking.type != "disabled",
        prefix=(parts.tools or [], parts.system if isinstance(parts.system, list) else []),
    )
    if checked.system_bytes:
        check_system_size(policy, parts, checked.system_bytes)
    _refuse_oversized(policy, model, checked.text_bytes, parts)
    body = _body(policy, model, generation, checked.messages, parts)
    if policy.caller.forward_user_id and user_id is not None:
        # Beside whatever else of metadata a caller may send (review keeps user_id apart).
        body["metadata"] = {**(parts.metadata or {}), "user_id": user_id}
    scope = key_scope(policy, caller)
    schema, output_tool = parts.output_schema, None
    if schema is None and policy.caller.output is not None:
        output_tool, schema = parts.forced_tool
    return Plan(
        task=policy.task,
        provider=model.provider,
        model_id=model.id,
        api_version=model.api_version,
        body=body,
        cache_mode=policy.cache.mode,
        output_format="json" if schema is not None else policy.output.format,
        output_schema=schema if schema is not None else policy.output.json_schema,
        output_tool=output_tool,
        requested=requested,
        in_body=in_body(
            body,
            {"tools": parts.tools, "system": parts.system, "output_format": parts.output_format},
        ),
        effective=generation.model_dump(mode="json", exclude_none=True),
        capped=capped,
        policy_fingerprint=policy.fingerprint,
        key_scope=scope,
        request_hash=canonical_digest(
            {"provider": model.provider, "api_version": model.api_version, "body": body, **scope}
        ),
    )


def key_scope(policy: Policy, caller: str | None) -> dict[str, str]:
    """What keys a request besides its wire form: the caller under a caller-scoped cache,
    the derivation's label for a derived policy. Empty for a task-wide reviewed policy, so
    such keys are exactly those recorded before scopes existed."""
    scope: dict[str, str] = {}
    if policy.cache.scope == "caller" and caller is not None:
        scope["caller"] = caller
    if policy.derived is not None:
        scope["derived"] = policy.derived.label
    if policy.model.region is not None:  # a cloud transport's answers are kept per region
        scope["region"] = policy.model.region
    return scope


def _apply_overrides(
    policy: Policy, requested: Mapping[str, object]
) -> tuple[Generation, dict[str, object], dict[str, int]]:
    """The generation with the caller's values applied, the parts the caller brings (checked
    by ``caller_parts``), and the values capped at the policy's ceiling."""
    opened = policy.caller.opened()
    changes: dict[str, object] = {}
    brought: dict[str, object] = {}
    capped: dict[str, int] = {}
    for key, value in requested.items():
        if is_opened(policy, key):
            brought[key] = value
            continue
        if key in RESERVED:
            governing, why = RESERVED[key]
            raise PolicyViolation(
                f"the request sets {key!r}, which no caller may set: "
                f"{why.format(model=policy.model.id)}.",
                key=governing,
            )
        if key in POLICY_TOOL_KEYS and policy.tools.definitions is not None:
            governing = POLICY_TOOL_KEYS[key]
            raise PolicyViolation(
                f"the request's {key!r} is not the policy's: the tools of task "
                f"{policy.task!r} are its own ({governing}). Send exactly the policy's "
                f"definitions, or leave {key!r} out and the gateway sends them.",
                key=governing,
            )
        bound = opened.get(key)
        if bound is None:
            allowed = ", ".join(_describe(k, b) for k, b in opened.items()) or "nothing"
            raise PolicyViolation(
                f"the policy for task {policy.task!r} does not let callers set {key!r}; "
                f"callers may set: {allowed}.",
                key=key,
            )
        if isinstance(bound, TokenRange) and _capped(bound, key, value):
            assert bound.max is not None
            capped[key] = int(bound.max)
            value = capped[key]
        elif not _within(key, bound, value):
            raise PolicyViolation(
                f"{key} = {value!r} is outside what the policy for task {policy.task!r} allows "
                f"({_describe(key, bound)}).",
                key=key,
            )
        changes[key] = value
    return policy.generation.model_copy(update=changes), brought, capped


def _capped(bound: TokenRange, key: str, value: object) -> bool:
    """A whole number above a capping range's maximum (lowered to it, not refused)."""
    return (
        bound.caps
        and bound.max is not None
        and isinstance(value, int)
        and not isinstance(value, bool)
        and key in INTEGER_KEYS
        and value > bound.max
    )


def _within(key: str, bound: CallerRange | CallerChoice, value: object) -> bool:
    if isinstance(bound, CallerChoice):
        return isinstance(value, str) and value in bound.allowed
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if key in INTEGER_KEYS and not isinstance(value, int):
        return False
    low_ok = bound.min is None or value >= bound.min
    return low_ok and bound.max is not None and value <= bound.max


def _describe(key: str, bound: CallerRange | CallerChoice) -> str:
    if isinstance(bound, CallerChoice):
        return f"{key} one of {list(bound.allowed)}"
    low = "" if bound.min is None else f"{bound.min:g} <= "
    return f"{low}{key} <= {bound.max:g}" if bound.max is not None else f"{key} (unbounded)"


def planning_day() -> date:
    """The day a plan's review rules are checked against (a model's retirement): the local
    day, as `gateway policy review` counts it. A plan kept for reuse is kept for this day
    only (gateway/request/_admitted.py)."""
    return date.today()


def _refuse_unhonoured(
    policy: Policy, model: ModelInfo, generation: Generation, requested: Mapping[str, object]
) -> None:
    # The same rules as review, on the model actually used (replay may re-plan under another
    # model): first the policy as written, then with the caller's overrides applied, so an
    # error that only the overrides cause is the caller's. Lifecycle warnings do not stop it.
    today = planning_day()
    own = _policy_errors(policy, model, today)
    if own:
        raise PolicyLoadError(
            f"the policy for task {policy.task!r} cannot be honoured by model {model.id!r}: "
            f"{own[0].message}",
            findings=tuple(own),
            hint=own[0].advice,
        )
    if generation == policy.generation:
        return  # the generation is the policy's own, checked just above
    caused = _override_errors(policy, model, today, generation, requested)
    if caused:
        finding = caused[0]
        named = finding.key.removeprefix("generation.").split(".")[0]
        key = named if named in requested else sorted(requested)[0]
        raise PolicyViolation(
            f"the override {key} = {shown_override(key, requested[key])} is not allowed "
            f"with this policy: "
            f"{finding.message} {finding.advice}",
            key=key,
        )


# The rules' verdict on a policy as written, per (policy content, model, day): the same for
# every request of a task, so it is worked out once rather than on each request. The model is
# kept with the verdict and compared by identity, so another catalog's entry is checked anew.
_VERDICTS: dict[tuple[str, str, date], tuple[ModelInfo, list[Finding]]] = {}
_VERDICTS_MAX = 512


def _policy_errors(policy: Policy, model: ModelInfo, today: date) -> list[Finding]:
    key = (policy.fingerprint, model.id, today)
    known = _VERDICTS.get(key)
    if known is not None and known[0] is model:
        return known[1]
    errors = _errors(Subject.of_policy(policy, model, today=today))
    if len(_VERDICTS) >= _VERDICTS_MAX:
        _VERDICTS.clear()
    _VERDICTS[key] = (model, errors)
    return errors


def _override_errors(
    policy: Policy,
    model: ModelInfo,
    today: date,
    generation: Generation,
    requested: Mapping[str, object],
) -> list[Finding]:
    # The rules see the policy with the overrides' generation, nothing else of the request
    # (not the parts a caller brings): the same verdict for the same generation of the same
    # policy, model and day. A service sends the same few values on every request.
    key = (policy.fingerprint, model.id, today, generation)
    known = _OVERRIDE_VERDICTS.get(key)
    if known is not None and known[0] is model:
        return known[1]
    errors = _errors(_with_overrides(policy, model, today, generation))
    if len(_OVERRIDE_VERDICTS) >= _VERDICTS_MAX:
        _OVERRIDE_VERDICTS.clear()
    _OVERRIDE_VERDICTS[key] = (model, errors)
    return errors


_OVERRIDE_VERDICTS: dict[tuple[str, str, date, Generation], tuple[ModelInfo, list[Finding]]] = {}


def _with_overrides(
    policy: Policy, model: ModelInfo, today: date, generation: Generation
) -> Subject:
    return Subject.of_policy(
        policy.model_copy(update={"generation": generation}), model, today=today
    )


def _errors(subject: Subject) -> list[Finding]:
    return [f for f in check(subject) if f.severity is Severity.ERROR]


def _refuse_oversized(
    policy: Policy, model: ModelInfo, text_bytes: int, parts: CallerParts
) -> None:
    system, tools = policy.prompt.system, policy.tools.definitions
    fixed = len(system.encode()) if system else 0
    if tools is not None:
        fixed += len(json.dumps(tools, ensure_ascii=False).encode())
    fixed += parts.size
    estimate = (text_bytes + fixed) // BYTES_PER_TOKEN
    if estimate > model.context_window:
        raise InputError(
            f"the input is about {estimate:,} tokens, more than the {model.context_window:,} "
            f"tokens model {model.id!r} can read.",
            hint="Shorten the input or split it into several requests.",
        )


def _body(
    policy: Policy,
    model: ModelInfo,
    g: Generation,
    messages: list[dict[str, Any]],
    parts: CallerParts,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model.id, "max_tokens": g.max_tokens, "messages": messages}
    if capabilities(model.provider).body_version is not None:
        # A cloud transport reads the API version from the body: planned here, so it is the
        # one sent (the SDK's cloud clients put their own only where the body has none).
        body["anthropic_version"] = model.api_version
    if policy.model.inference_geo is not None and capabilities(model.provider).inference_geo:
        # A model that runs on this machine (or a transport without the field) has no
        # region to choose.
        body["inference_geo"] = policy.model.inference_geo
    # Prompt caching: the cached prefix runs tools -> system -> messages, so one breakpoint at
    # the end of the policy's fixed part (the system prompt, else the last tool) caches both
    # and leaves the other breakpoints to callers the policy lets set them.
    system, ttl = policy.prompt.system, policy.prompt.cache
    cache = {"type": "ephemeral", "ttl": ttl} if ttl is not None else None
    if policy.tools.definitions is not None:
        tools = copy.deepcopy(policy.tools.definitions)
        if cache is not None and system is None:
            tools[-1]["cache_control"] = dict(cache)
        body["tools"] = tools
        choice = policy.tools.chosen
        keyword = choice in ("auto", "any", "none")
        body["tool_choice"] = {"type": choice} if keyword else {"type": "tool", "name": choice}
    elif parts.tools is not None:  # the parts are the plan's own copies (_owned_parts.owned)
        body["tools"] = parts.tools
        if parts.tool_choice is not None:
            body["tool_choice"] = parts.tool_choice
    if parts.system is not None and (system is None or _system_mode(policy) == "own"):
        body["system"] = parts.system
    elif parts.system is not None:
        # The policy's text first, as its own block (with its cache breakpoint), then the
        # caller's, as sent: a caller's text can add to the policy's, never come before it.
        own: dict[str, Any] = {"type": "text", "text": system}
        if cache is not None:
            own["cache_control"] = cache
        added = parts.system
        theirs = [{"type": "text", "text": added}] if isinstance(added, str) else added
        body["system"] = [own, *theirs]
    elif system is not None:
        if cache is not None:
            body["system"] = [{"type": "text", "text": system, "cache_control": cache}]
        else:
            body["system"] = system
    stops = [*g.stop_sequences, *parts.stop_sequences]
    if stops:
        body["stop_sequences"] = stops
    if model.honours_sampling:  # otherwise review already refused any sampling value
        for key in ("temperature", "top_p", "top_k"):
            if (value := getattr(g, key)) is not None:
                body[key] = value
    if g.thinking is not None:
        body["thinking"] = g.thinking.model_dump(exclude_none=True)
    output_config: dict[str, Any] = {}
    if g.effort is not None:
        output_config["effort"] = g.effort
    if policy.output.format == "json" and model.structured_outputs:
        output_config["format"] = {"type": "json_schema", "schema": policy.output.json_schema}
    elif parts.output_format is not None:
        output_config["format"] = parts.output_format
    if output_config:
        body["output_config"] = output_config
    for key in ("metadata", "context_management"):
        if (value := getattr(parts, key)) is not None:
            body[key] = value
    if parts.betas:
        # Named in the body, so they are in the request's key; a transport that takes them
        # as the anthropic-beta header (the first-party API) moves them there when it sends.
        body[BETAS_FIELD] = list(parts.betas)
    return body


def _system_mode(policy: Policy) -> str:
    contract = policy.caller.system
    return contract.mode if contract is not None else "policy"
