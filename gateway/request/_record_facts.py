"""The facts a call's events carry beside its content: what an opened contract adds to a
REQUEST, why an answer cannot be replayed, what a stream delivered before it ended, the text a
JSON answer is checked in, what a REQUEST says of the caller's overrides, and a bounded
summary of what a refused request asked for.

An override the caller wrote (a system prompt, tools, a schema, stop sequences, metadata) is
content: it goes in the sealed ``overrides`` payload, where erasure reaches it and a reviewer
reads it only against an ACCESS record; the event names it by its size alone (a digest of a
short prompt would let anyone confirm a guess, after erasure too). Settings (a number, a
switch, a value from the policy's allow-list) are recorded as given."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from audit.canonical import canonical_bytes, compact_bytes
from gateway._inputs import check_bounded, safe_label
from gateway._output_check import response_text
from gateway.errors import InputError
from gateway.policy import CONTENT_OVERRIDES, IN_BODY, Plan, Policy
from gateway.providers.base import BETAS_FIELD
from gateway.providers.stream import MessageAssembler
from gateway.request._replayable import outside_world

_LABEL_CHARS = 64  # a category or type is a short word; anything longer is text


def stop_sequence(response: Mapping[str, Any]) -> str | None:
    stop = response.get("stop_sequence")
    return stop if isinstance(stop, str) else None


def stop_details_facts(details: object) -> object:
    """A refusal's ``stop_details`` as its RESPONSE may hold it: the category and other labels
    as given, but its explanation (the model's own words, which may quote the prompt) by its
    length alone; the whole of it stays in the ``response_body`` payload."""
    if not isinstance(details, Mapping):
        return {"bytes": len(compact_bytes(details))}
    facts: dict[str, Any] = {}
    for key, value in details.items():
        if isinstance(value, str) and (key == "explanation" or len(value) > _LABEL_CHARS):
            facts[f"{safe_label(key)}_chars"] = len(value)
        elif isinstance(value, str | int | float | bool) or value is None:
            facts[safe_label(key)] = value
        else:
            facts[f"{safe_label(key)}_chars"] = len(compact_bytes(value))
    return facts


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


def quoted_text(data: Mapping[str, Any], key: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``data`` without ``key`` (an upstream's or a provider's words, which may quote the
    prompt), and the payload that holds them instead; the data says only how long they were
    (``<key>_bytes``). Nothing when the text is empty."""
    kept = dict(data)
    text = kept.pop(key, None)
    if not isinstance(text, str) or not text:
        return kept, {}
    raw = text.encode()
    kept[f"{key}_bytes"] = len(raw)
    return kept, {key: raw}


OVERRIDES_PAYLOAD = "overrides"  # the REQUEST's payload holding the overrides as sent


def _json_size(value: object) -> int:
    return len(compact_bytes(value))


def recorded_overrides(plan: Plan) -> tuple[dict[str, Any], dict[str, bytes]]:
    """What a REQUEST's data says of the caller's overrides, and the payloads that hold them.

    The data: each setting as given, each content override by size alone (``{"bytes": N}``);
    a content part the body holds exactly as sent (its tools, its own system prompt, its
    schema: ``plan.in_body``) named by where it is there (``requested_in_body``), so it is
    written once, in ``request_body``. The sealed ``overrides`` payload: every other override
    as sent, when one of them is content (none otherwise: such requests record what they
    always did). Either way the content is erased with the request."""
    in_body = plan.in_body
    rest = {k: v for k, v in plan.requested.items() if k not in in_body}
    shown: dict[str, Any] = {}
    for key, value in plan.requested.items():
        shown[key] = {"bytes": _json_size(value)} if key in CONTENT_OVERRIDES else value
    facts: dict[str, Any] = {"requested": shown}
    if in_body:
        facts[IN_BODY] = {k: list(path) for k, path in in_body.items()}
    if not CONTENT_OVERRIDES.intersection(rest):
        return facts, {}
    return facts, {OVERRIDES_PAYLOAD: compact_bytes(rest)}


# A refused request is never sent: its record needs what was asked, not megabytes of it.
MAX_RECORDED_VALUE_BYTES = 256  # canonical bytes of an override value kept as given
MAX_RECORDED_KEYS = 64


def refused_input_summary(overrides: object) -> dict[str, Any]:
    """What a REJECTED event says of the overrides a caller asked for, bounded whatever
    they were: ``requested`` holds each small setting as given (a temperature, a flag);
    ``requested_omitted`` each content override and each larger value by its size alone (a
    refused request's content has no payload to erase, so none of it enters the log, and a
    4 MiB junk system prompt costs a few bytes); past MAX_RECORDED_KEYS keys,
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
        if size <= MAX_RECORDED_VALUE_BYTES and key not in CONTENT_OVERRIDES:
            kept[name] = value
        else:
            omitted[name] = {"bytes": size}
    summary: dict[str, Any] = {"requested": kept}
    if omitted:
        summary["requested_omitted"] = omitted
    if len(overrides) > MAX_RECORDED_KEYS:
        summary["requested_keys_omitted"] = len(overrides) - MAX_RECORDED_KEYS
    return summary
