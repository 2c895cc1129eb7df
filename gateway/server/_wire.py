"""The Messages API's request and response bodies, and the gateway's call they stand for.

    call = parse_messages(body, header_task=None, policies=policies)
    call.task, call.messages, call.overrides, call.stream
    message_body(result)          # {"id": ..., "type": "message", "content": [...], ...}

The request's ``model`` names the task (or the ``x-gateway-task`` header does; the body's
``model`` is then not used): the policy decides the real model. ``messages`` is the input.
Every other field is an override under its own name, checked by the gateway against the
policy's ``[caller]`` table, so a ``system`` prompt, a sampling value or ``tools`` the policy
does not open is a PolicyViolation naming the key (and a REJECTED event), never dropped; one
the policy opens (its caller contract) is sent as the caller sent it. The ``anthropic-beta``
header's values are the ``betas`` override (a list). Four mappings besides:

- ``max_tokens``, which the API and every SDK require, is a ceiling: when the policy does not
  open ``max_tokens`` to callers, a value at or above the policy's own is satisfied by it and
  not passed on; a lower one is passed, and refused. When the policy opens it, it is passed.
- ``output_config.effort`` is the ``effort`` override, ``output_config.format`` the
  ``output_format`` override (the caller's JSON schema); other ``output_config`` keys pass as
  ``output_config.<key>``.
- ``tools`` identical to the policy's tools file, and a ``tool_choice`` that is its ``[tools]
  choice``, are what the gateway sends anyway (SDK tool loops send them every turn): not
  passed on. Any other is passed, and the planner refuses it naming ``tools.file`` /
  ``tools.choice``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import GatewayError
from gateway.policy import PolicySet
from gateway.result import Result
from gateway.server._errors import ApiError

__all__ = [
    "CAPPED_HEADER",
    "MessagesCall",
    "capped_header",
    "message_body",
    "parse_count_tokens",
    "parse_messages",
    "result_headers",
]

_SELF = frozenset({"model", "messages", "stream"})
# The answer's header naming values the policy lowered to its ceiling: "max_tokens=8192".
CAPPED_HEADER = "x-gateway-capped"
_OUTPUT_CONFIG = {"effort": "effort", "format": "output_format"}
MAX_BETAS = 64  # far more than any client sends; the policy's list bounds them anyway


@dataclass(frozen=True)
class MessagesCall:
    task: str
    messages: list[dict[str, Any]]
    overrides: dict[str, object] = field(default_factory=dict)
    stream: bool = False


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request_error", message)


def parse_messages(
    body: object, *, header_task: str | None, policies: PolicySet, betas: str | None = None
) -> MessagesCall:
    """``betas``: the request's ``anthropic-beta`` header, if it has one."""
    if not isinstance(body, dict):
        raise _invalid("the request body must be a JSON object.")
    task = header_task if header_task else body.get("model")
    if not isinstance(task, str) or not task:
        raise _invalid(
            "'model' must name the gateway task (e.g. \"compliance_review\"), or send the "
            "x-gateway-task header."
        )
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _invalid("'messages' must be a list of {'role', 'content'} objects.")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _invalid("'stream' must be true or false.")
    if "betas" in body:
        raise _invalid("beta features are named in the anthropic-beta header, not the body.")
    overrides: dict[str, object] = {}
    for key, value in body.items():
        if key in _SELF:
            continue
        if key == "output_config" and isinstance(value, dict):
            for inner, setting in value.items():
                overrides[_OUTPUT_CONFIG.get(inner, f"output_config.{inner}")] = setting
        elif key == "max_tokens":
            if not _ceiling_met(task, value, policies):
                overrides[key] = value
        elif key in ("tools", "tool_choice"):
            if not _policy_tools_repeated(task, key, value, policies):
                overrides[key] = value
        else:
            overrides[key] = value
    if betas is not None:
        overrides["betas"] = _beta_values(betas)
    return MessagesCall(task=task, messages=messages, overrides=overrides, stream=stream)


def _beta_values(header: str) -> list[str]:
    """The anthropic-beta header's comma-separated values, in the order sent."""
    values = [v.strip() for v in header.split(",") if v.strip()]
    if not values or len(values) > MAX_BETAS:
        raise _invalid(
            f"the anthropic-beta header must name 1 to {MAX_BETAS} beta values, "
            "separated by commas."
        )
    return values


# The fields of a count_tokens request the model would read besides its messages.
COUNTED = ("system", "tools", "tool_choice", "thinking")


def parse_count_tokens(
    body: object, *, header_task: str | None, policies: PolicySet
) -> MessagesCall:
    """A count_tokens request as the messages call it sizes: its task, its messages and the
    caller parts the model would read (``system``, ``tools``, ``tool_choice``,
    ``thinking``), checked against the policy's contract as a message's are. Its other
    fields (none that the model reads) are not used."""
    if not isinstance(body, dict):
        raise _invalid("the request body must be a JSON object.")
    read = {key: body[key] for key in ("model", "messages", *COUNTED) if key in body}
    return parse_messages(read, header_task=header_task, policies=policies)


def _ceiling_met(task: str, value: object, policies: PolicySet) -> bool:
    """A max_tokens the policy's own value satisfies, on a policy closed to it."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    try:
        policy = policies.get(task)
    except GatewayError:
        return False  # the gateway refuses the task itself, and records why
    if "max_tokens" in policy.caller.opened():
        return False
    own = policy.generation.max_tokens
    return own is not None and value >= own


def _policy_tools_repeated(task: str, key: str, value: object, policies: PolicySet) -> bool:
    """``tools`` identical to the policy's tools file, or a ``tool_choice`` that is the
    policy's ``[tools] choice``: what the gateway sends anyway, so not an override."""
    try:
        policy = policies.get(task)
    except GatewayError:
        return False
    if policy.tools.definitions is None:
        return False  # a policy without tools refuses both, naming the key
    if key == "tools":
        return value == policy.tools.definitions
    return _choice_name(value) == policy.tools.chosen


def _choice_name(value: object) -> str | None:
    """A tool_choice in the policy file's terms: its keyword, or the forced tool's name."""
    if not isinstance(value, dict):
        return None
    if value.keys() == {"type"} and value["type"] in ("auto", "any", "none"):
        return str(value["type"])
    if value.keys() == {"type", "name"} and value["type"] == "tool":
        name = value["name"]
        return name if isinstance(name, str) else None
    return None


def message_body(result: Result) -> dict[str, Any]:
    """``result`` as the API's message object; ``id`` is the gateway's request id."""
    usage = dict(result.usage)
    usage.setdefault("input_tokens", 0)
    usage.setdefault("output_tokens", 0)
    return {
        "id": result.request_id,
        "type": "message",
        "role": "assistant",
        "model": result.model,
        # The blocks as the model answered them (text, tool calls, thinking).
        "content": list(result.content) or [{"type": "text", "text": result.text}],
        "stop_reason": result.stop_reason,
        "stop_sequence": result.stop_sequence,
        "usage": usage,
    }


def result_headers(result: Result, *, seq: bool = False) -> dict[str, str]:
    """``seq``: also the answer's audit seq (``server_seq_header``), which counts every
    caller's events, so that its steps tell a caller what others did in between."""
    headers = {
        "request-id": result.request_id,
        "x-gateway-cached": "true" if result.cached else "false",
    }
    if seq:
        headers["x-gateway-seq"] = str(result.seq)
    if result.capped:
        headers[CAPPED_HEADER] = capped_header(result.capped)
    return headers


def capped_header(capped: Mapping[str, int]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(capped.items()))
