"""The facts a call's events carry beside its content: what an opened contract adds to a
REQUEST, why an answer cannot be replayed, what a stream delivered before it ended, the text a
JSON answer is checked in, and a bounded summary of what a refused request asked for."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from audit.canonical import canonical_bytes, canonical_digest
from gateway._inputs import check_bounded, safe_label
from gateway._output_check import response_text
from gateway.errors import InputError
from gateway.policy import IN_BODY, Plan, Policy
from gateway.providers.base import BETAS_FIELD
from gateway.providers.stream import MessageAssembler
from gateway.request._replayable import outside_world


def stop_sequence(response: Mapping[str, Any]) -> str | None:
    stop = response.get("stop_sequence")
    return stop if isinstance(stop, str) else None


def checked_text(plan: Plan, response: Mapping[str, Any]) -> str:
    """The text a JSON answer is checked in: the answer's text, or the input of the tool the
    caller forced as its output (``Plan.output_tool``; "" when the answer did not call it)."""
    if plan.output_tool is None:
        return response_text(response)
    for block in response.get("content") or ():
        if (
            isinstance(block, dict)
            and block.get("type") == "tool_use"
            and block.get("name") == plan.output_tool
        ):
            return json.dumps(block.get("input"), ensure_ascii=False)
    return ""


def contract_facts(plan: Plan) -> dict[str, Any]:
    """What an opened contract adds to a REQUEST, only when it applies (so other requests
    record what they always did): the values capped at the policy's ceiling, the anthropic-beta
    values sent as a header (not in the body bytes), and the caller's output schema check."""
    facts: dict[str, Any] = {}
    if plan.capped:
        facts["capped"] = plan.capped
    betas = plan.body.get(BETAS_FIELD)
    if betas:
        facts["anthropic_beta"] = betas
    if plan.output_tool is not None:
        facts["output_tool"] = plan.output_tool
    return facts


def requested_facts(plan: Plan) -> dict[str, Any]:
    """The caller's overrides as a REQUEST records them: each part the body holds as sent by
    where it is in the body (``requested_in_body``, read back with
    ``gateway.policy.recorded_overrides``), the rest as sent (``requested``). The body is the
    request_body payload: one copy of the caller's tools in the log, not two, and erased with
    it."""
    if not plan.in_body:
        return {"requested": plan.requested}
    return {
        "requested": {k: v for k, v in plan.requested.items() if k not in plan.in_body},
        IN_BODY: {k: list(path) for k, path in plan.in_body.items()},
    }


def replayability(policy: Policy) -> dict[str, str]:
    """``not_replayable``: why this request's answer cannot be replayed; absent when it can."""
    reason = outside_world(policy)
    return {"not_replayable": reason} if reason else {}


def partial_facts(partial: MessageAssembler) -> tuple[dict[str, Any], dict[str, bytes]]:
    """What a stream delivered before it ended: its size and last usage in the event's data,
    the partial message (its text) as a payload only: event bodies hold no content, so a
    role that may read the events but not the content (a PostgreSQL reviewer, migration
    0015) reads no answer in them."""
    data = {
        "text_chars": len(partial.text()),
        "usage": dict(partial.usage),
        "events": partial.event_count,
        "stop_reason": partial.stop_reason,
    }
    message = partial.message()
    payloads = {} if message is None else {"partial_response": json_bytes(message)}
    return data, payloads


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def finite(value: float) -> float:
    return round(value, 3) if math.isfinite(value) else -1.0


def token_total(usage: Mapping[str, Any]) -> int:
    return sum(v for k, v in usage.items() if k.endswith("tokens") and isinstance(v, int))


# A refused request is never sent: its record needs what was asked, not megabytes of it.
MAX_RECORDED_VALUE_BYTES = 256  # canonical bytes of an override value kept as given
MAX_RECORDED_KEYS = 64


def refused_input_summary(overrides: object) -> dict[str, Any]:
    """What a REJECTED event says of the overrides a caller asked for, bounded whatever
    they were: ``requested`` holds each small value as given (a temperature, a flag);
    ``requested_omitted`` each larger one by size and digest (a 4 MiB junk system prompt
    costs a few dozen bytes of permanent log); past MAX_RECORDED_KEYS keys,
    ``requested_keys_omitted`` counts the rest. Keys are shown as labels (escaped,
    bounded)."""
    if overrides is None:
        return {"requested": {}}
    if not isinstance(overrides, Mapping):
        return {"requested": {"unrecordable": f"<{type(overrides).__name__}>"}}
    kept: dict[str, Any] = {}
    omitted: dict[str, Any] = {}
    for key, value in list(overrides.items())[:MAX_RECORDED_KEYS]:
        name = safe_label(key)
        try:
            check_bounded(value, "an override")  # before the canonical form: it recurses
            size = len(canonical_bytes(value))
        except (InputError, ValueError, TypeError):
            omitted[name] = {"unrecordable": "nested too deep, too large or not JSON"}
            continue
        if size <= MAX_RECORDED_VALUE_BYTES:
            kept[name] = value
        else:
            omitted[name] = {"bytes": size, "digest": canonical_digest(value)}
    summary: dict[str, Any] = {"requested": kept}
    if omitted:
        summary["requested_omitted"] = omitted
    if len(overrides) > MAX_RECORDED_KEYS:
        summary["requested_keys_omitted"] = len(overrides) - MAX_RECORDED_KEYS
    return summary
