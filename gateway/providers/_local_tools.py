"""Tool calls for the offline model: a canned, schema-valid call, so tool tasks run offline.

    call = tool_call(body, prompt_text, rng)
    # {"type": "tool_use", "id": "toolu_local_...", "name": "lookup_entity",
    #  "input": {"name": "Screen ACME Holdings Ltd", "entity_type": "individual"}}
    # (the input from the last user turn: "Screen ACME Holdings Ltd")

An n-gram model cannot decide when a tool helps, so the rule is fixed and visible: a turn
that follows no tool result calls a tool when ``tool_choice`` lets it (``auto``, ``any`` or
one named tool; ``none`` never), the named tool or else the first declared one; a turn that
answers a tool result is text. The input holds every required property: an enum's first
value, the caller's words (cut to fit) for a string, zero, false, an empty list or object.
It is validated against the tool's ``input_schema`` before it is returned, so a strict tool
never gets input that does not match; a schema this rule cannot satisfy is a
:class:`LocalRequestError`, never a silently wrong call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import numpy as np

from gateway.providers.base import RequestNotHonoured

WORDS_IN_A_STRING = 60  # characters of the caller's text put into a string property


class LocalToolError(RequestNotHonoured, ValueError):
    error_type = "local_request_error"
    summary = "the local model could not honour this request."


def tool_call(
    body: Mapping[str, Any], prompt: str, rng: np.random.Generator
) -> dict[str, Any] | None:
    """The tool_use block this turn answers with, or None for a text answer. ``prompt`` is
    the whole prompt text, used when the last turn holds no text of the caller's own."""
    tools = body.get("tools")
    if not tools:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise LocalToolError("tools must be a list of tool definitions.")
    choice = body.get("tool_choice") or {"type": "auto"}
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "none" or _answers_a_tool_result(body.get("messages")):
        return None
    if kind not in ("auto", "any", "tool"):
        raise LocalToolError(f"tool_choice {choice!r:.80} is not one the local model knows.")
    tool = _chosen(tools, choice.get("name") if kind == "tool" else None)
    schema = tool.get("input_schema") or {"type": "object"}
    arguments = _value(schema, _last_user_text(body.get("messages")) or prompt)
    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError as exc:
        raise LocalToolError(
            f"the local model cannot fill tool {tool.get('name')!r}'s input_schema "
            f"({exc.message:.120}).",
            hint="Run this task on Claude, or give the tool a simpler input schema.",
        ) from None
    except jsonschema.SchemaError as exc:
        raise LocalToolError(f"tool {tool.get('name')!r} has an invalid input_schema.") from exc
    return {
        "type": "tool_use",
        "id": f"toolu_local_{rng.bytes(12).hex()}",
        "name": tool.get("name"),
        "input": arguments,
    }


def _last_user_text(messages: object) -> str:
    """The caller's own words of the turn being answered (not the system prompt)."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""


def _answers_a_tool_result(messages: object) -> bool:
    if not isinstance(messages, list) or not messages:
        return False
    content = messages[-1].get("content") if isinstance(messages[-1], dict) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _chosen(tools: Sequence[dict[str, Any]], name: object) -> dict[str, Any]:
    if name is None:
        return tools[0]
    for tool in tools:
        if tool.get("name") == name:
            return tool
    raise LocalToolError(f"tool_choice names {name!r}, which is not among the tools.")


def _value(schema: Mapping[str, Any], prompt: str) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {
            key: _value(properties.get(key) or {}, prompt) for key in schema.get("required") or []
        }
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return " ".join(prompt.split())[:WORDS_IN_A_STRING] or "unknown"
