"""The parts of a request a caller brings under an opened contract, each checked against its
bound in the policy's ``[caller]`` table.

    parts = caller_parts(policy, model, {"system": "You help the FX desk.", "tools": [...]})
    parts.system, parts.tools, parts.output_schema, parts.thinking, parts.betas

Each part is kept exactly as the caller sent it (the plan puts it on the wire as is, so the
REQUEST records it and it is part of the replay key); a part outside its bound is a
PolicyViolation naming the ``[caller]`` key, a malformed one an InputError. Which override
keys are parts: :data:`PART_OF` (override key -> its ``[caller]`` key).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import jsonschema
import orjson
from pydantic import ValidationError

from gateway.catalog import ModelInfo
from gateway.errors import InputError, PolicyViolation
from gateway.policy._owned_parts import bytes_over, owned
from gateway.policy._schema import (
    CallerChoice,
    CallerOutput,
    CallerStops,
    CallerSystem,
    CallerThinking,
    CallerTools,
    Policy,
    Thinking,
)

# Override key -> the [caller] key that opens it.
PART_OF = {
    "system": "system",
    "tools": "tools",
    "tool_choice": "tools",
    "output_format": "output",
    "thinking": "thinking",
    "stop_sequences": "stop_sequences",
    "metadata": "metadata",
    "context_management": "context_management",
    "betas": "betas",
}
MAX_METADATA_VALUE = 256  # the Messages API's limit on metadata.user_id
CHOICE_TYPES = ("auto", "any", "none", "tool")


@dataclass(frozen=True)
class CallerParts:
    """What the caller brought, as sent; None (or empty) for a part it did not bring."""

    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    output_format: dict[str, Any] | None = None
    thinking: Thinking | None = None
    stop_sequences: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    context_management: dict[str, Any] | None = None
    betas: tuple[str, ...] = ()
    # The UTF-8 bytes of the parts as JSON: what they add to the input, roughly.
    size: int = 0

    @property
    def tool_names(self) -> frozenset[str]:
        """The names of the caller's tools the caller runs (tool_use blocks may call them)."""
        return frozenset(
            str(t["name"]) for t in self.tools or () if t.get("type", "custom") == "custom"
        )

    @property
    def forced_tool(self) -> tuple[str | None, dict[str, Any] | None]:
        """The caller's tool the model must call (tool_choice names it, or "any" with one
        tool), and its input schema: the answer's output when the caller forces it."""
        choice, tools = self.tool_choice, self.tools or []
        if choice is None or choice["type"] not in ("tool", "any"):
            return None, None
        named = choice.get("name") if choice["type"] == "tool" else None
        if named is None and len(tools) != 1:
            return None, None
        tool = next(t for t in tools if named is None or t["name"] == named)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            return None, None
        check_schema(schema, f"the input_schema of tool {str(tool['name'])[:64]!r}")
        return str(tool["name"]), schema

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return self.output_format["schema"] if self.output_format is not None else None


def is_opened(policy: Policy, key: str) -> bool:
    """Whether the override ``key`` is a part the policy opens to callers."""
    part = PART_OF.get(key)
    return part is not None and part in policy.caller.parts()


def caller_parts(policy: Policy, model: ModelInfo, brought: Mapping[str, object]) -> CallerParts:
    """The parts in ``brought`` (override keys the policy opens), checked."""
    contract = policy.caller
    brought, size = owned(brought)
    found: dict[str, Any] = {"size": size}
    if "system" in brought:
        assert contract.system is not None
        found["system"] = _system(policy, contract.system, brought["system"])
    if "tools" in brought or "tool_choice" in brought:
        assert contract.tools is not None
        tools = _tools(policy, contract.tools, brought.get("tools"), size)
        found["tools"] = tools
        if "tool_choice" in brought:
            found["tool_choice"] = _tool_choice(
                policy, contract.tools, brought["tool_choice"], tools
            )
    if "output_format" in brought:
        assert contract.output is not None
        found["output_format"] = _output(policy, contract.output, model, brought["output_format"])
    if "thinking" in brought:
        assert contract.thinking is not None
        found["thinking"] = _thinking(policy, contract.thinking, brought["thinking"])
    if "stop_sequences" in brought:
        assert contract.stop_sequences is not None
        found["stop_sequences"] = _stops(policy, contract.stop_sequences, brought["stop_sequences"])
    if "metadata" in brought:
        assert contract.metadata is not None
        found["metadata"] = _metadata(policy, contract.metadata, brought["metadata"])
    if "context_management" in brought:
        assert contract.context_management is not None
        found["context_management"] = _context_management(
            policy, contract.context_management, brought["context_management"]
        )
    if "betas" in brought:
        assert contract.betas is not None
        found["betas"] = _betas(policy, contract.betas, brought["betas"])
    parts = CallerParts(**found)
    _refuse_forced_choice_with_thinking(policy, parts)
    return parts


def _outside(policy: Policy, key: str, what: str) -> PolicyViolation:
    return PolicyViolation(
        f"{what}, outside what the policy for task {policy.task!r} allows ([caller] {key}).",
        key=f"caller.{key}",
    )


# -- system prompt ----------------------------------------------------------------------------


def _system(policy: Policy, bound: CallerSystem, value: object) -> str | list[dict[str, Any]]:
    if not (
        isinstance(value, str)
        or (isinstance(value, list) and value and all(_is_text_block(b) for b in value))
    ):
        raise InputError(
            "the request's 'system' is neither text nor a list of text blocks "
            '({"type": "text", "text": ..., "cache_control"?}).'
        )
    _within_system_bound(policy, bound, system_bytes(value))
    return value


def system_bytes(value: str | list[dict[str, Any]] | None) -> int:
    """The UTF-8 bytes of a caller's system text (a string or text blocks)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    return sum(len(b["text"].encode()) for b in value)


def check_system_size(policy: Policy, parts: CallerParts, in_turns: int) -> None:
    """The caller's system text, with the system messages inside its conversation
    (``in_turns`` bytes), within ``[caller] system`` max_bytes."""
    assert policy.caller.system is not None  # only such a caller may send system turns
    _within_system_bound(policy, policy.caller.system, system_bytes(parts.system) + in_turns)


def _within_system_bound(policy: Policy, bound: CallerSystem, size: int) -> None:
    if bound.max_bytes is not None and size > bound.max_bytes:
        raise _outside(
            policy,
            "system",
            f"the caller's system text is {size:,} bytes, more than {bound.max_bytes:,}",
        )


def _is_text_block(block: object) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and set(block) <= {"type", "text", "cache_control"}
    )


# -- tools ------------------------------------------------------------------------------------


def _tools(
    policy: Policy, bound: CallerTools, value: object, brought_size: int
) -> list[dict[str, Any]] | None:
    """``brought_size``: the compact JSON bytes of every part brought (:func:`owned`), which
    hold the tools' own: far enough within the bound (4/3 of it, :func:`bytes_over`'s margin
    for orjson's spelling of a float), they need no measuring of their own."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] for t in value
    ):
        raise InputError("the request's 'tools' is not a list of tools, each with a 'name'.")
    if bound.max_count is not None and len(value) > bound.max_count:
        raise _outside(
            policy, "tools", f"the request declares {len(value)} tools, more than {bound.max_count}"
        )
    most = bound.max_bytes
    size = None if most is None or 4 * brought_size <= 3 * most else bytes_over(value, most)
    if size is not None:
        raise _outside(
            policy,
            "tools",
            f"the request's tools are {size:,} bytes, more than {bound.max_bytes:,}",
        )
    names: set[str] = set()
    allow_all = "*" in bound.allow  # matches every name: no pattern to run per tool
    for tool in value:
        name = str(tool["name"])
        if name in names:
            raise InputError(f"the request declares tool {name[:64]!r} twice.")
        names.add(name)
        allowed = allow_all or any(fnmatchcase(name, p) for p in bound.allow)
        if not allowed or any(fnmatchcase(name, p) for p in bound.deny):
            raise _outside(policy, "tools", f"the request declares tool {name[:64]!r}")
        kind = tool.get("type", "custom")
        if kind != "custom" and kind not in bound.server:
            server = ", ".join(bound.server) or "none"
            raise _outside(
                policy,
                "tools",
                f"the request declares {name[:64]!r}, a provider-run tool of type "
                f"{str(kind)[:64]!r} (server tools allowed: {server})",
            )
    return value


def _tool_choice(
    policy: Policy, bound: CallerTools, value: object, tools: list[dict[str, Any]] | None
) -> dict[str, Any]:
    if (
        not isinstance(value, dict)
        or value.get("type") not in CHOICE_TYPES
        or not set(value) <= {"type", "name", "disable_parallel_tool_use"}
        or ("name" in value) != (value["type"] == "tool")
    ):
        raise InputError(
            "the request's 'tool_choice' is not one the Messages API defines "
            '({"type": "auto" | "any" | "none"} or {"type": "tool", "name": ...}).'
        )
    if tools is None:
        raise InputError("the request sets 'tool_choice' but declares no tools.")
    if value["type"] == "tool" and value["name"] not in {t["name"] for t in tools}:
        raise InputError(
            f"the request's tool_choice names {str(value['name'])[:64]!r}, which is not one "
            "of its tools."
        )
    if bound.choice == "auto" and value["type"] != "auto":
        raise _outside(
            policy,
            "tools",
            f"the request sets tool_choice {value['type']!r}; callers leave the choice to "
            'the model (choice = "auto")',
        )
    return value


# -- structured output ------------------------------------------------------------------------


def _output(policy: Policy, bound: CallerOutput, model: ModelInfo, value: object) -> dict[str, Any]:
    if not bound.json_schema:
        raise _outside(policy, "output", "the request brings its own output schema")
    if (
        not isinstance(value, dict)
        or set(value) != {"type", "schema"}
        or value["type"] != "json_schema"
        or not isinstance(value["schema"], dict)
    ):
        raise InputError(
            'the request\'s output_config.format is not {"type": "json_schema", "schema": {...}}.'
        )
    if not model.structured_outputs:
        raise _outside(
            policy, "output", f"model {model.id!r} cannot hold an answer to a JSON schema"
        )
    size = bytes_over(value["schema"], bound.max_bytes)
    if size is not None:
        raise _outside(
            policy,
            "output",
            f"the request's schema is {size:,} bytes, more than {bound.max_bytes:,}",
        )
    check_schema(value["schema"], "the request's output schema")
    return value


def check_schema(schema: dict[str, Any], what: str) -> None:
    """An InputError unless ``schema`` is a JSON schema the answer check can use. The
    metaschema check costs milliseconds and a framework sends the same schema on every
    request: a schema found valid is remembered by its exact JSON (per process, bounded)."""
    try:
        key: bytes | None = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: not plain JSON to orjson, checked each time
        key = None
    if key is not None and key in _VALID_SCHEMAS:
        return
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InputError(f"{what} is not a valid JSON schema ({str(exc.message)[:120]}).") from None
    # Remembered only when its key reads back as the schema itself: orjson writes NaN as null
    # and a tuple as a list, so such a schema would share a key with one that is not valid.
    if key is not None and len(key) <= _VALID_SCHEMAS_BYTES // 64 and orjson.loads(key) == schema:
        if len(_VALID_SCHEMAS) >= 64:
            _VALID_SCHEMAS.clear()  # a memo of verdicts, not a record: start again
        _VALID_SCHEMAS.add(key)


_VALID_SCHEMAS: set[bytes] = set()  # at most 64 schemas of at most 64 KB each
_VALID_SCHEMAS_BYTES = 4 * 1024 * 1024


# -- thinking, stop sequences, metadata, context management, betas ----------------------------


def _thinking(policy: Policy, bound: CallerThinking, value: object) -> Thinking:
    try:
        thinking = Thinking.model_validate(value)
    except ValidationError:
        raise InputError(
            "the request's 'thinking' is not one the Messages API defines "
            '({"type": "enabled", "budget_tokens": N}, {"type": "adaptive"} or '
            '{"type": "disabled"}).'
        ) from None
    if thinking.type not in bound.allowed:
        raise _outside(policy, "thinking", f"the request sets thinking type {thinking.type!r}")
    budget, most = thinking.budget_tokens, bound.max_budget_tokens
    if budget is not None and (most is None or budget > most):
        raise _outside(
            policy, "thinking", f"the request's thinking budget_tokens = {budget} exceeds {most}"
        )
    return thinking


def _stops(policy: Policy, bound: CallerStops, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(s, str) and s.strip() for s in value):
        raise InputError("the request's 'stop_sequences' is not a list of non-blank texts.")
    if len(value) > bound.max_count:
        raise _outside(
            policy,
            "stop_sequences",
            f"the request sets {len(value)} stop sequences, more than {bound.max_count}",
        )
    if any(len(s) > bound.max_length for s in value):
        raise _outside(
            policy,
            "stop_sequences",
            f"a stop sequence is longer than {bound.max_length} characters",
        )
    return tuple(value)


def _metadata(policy: Policy, bound: CallerChoice, value: object) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(
        isinstance(v, str) and len(v) <= MAX_METADATA_VALUE for v in value.values()
    ):
        raise InputError(
            f"the request's 'metadata' is not an object of texts of at most "
            f"{MAX_METADATA_VALUE} characters."
        )
    extra = sorted(set(value) - set(bound.allowed))
    if extra:
        raise _outside(policy, "metadata", f"the request sets metadata {str(extra[0])[:64]!r}")
    return value


def _context_management(policy: Policy, bound: CallerChoice, value: object) -> dict[str, Any]:
    edits = value.get("edits") if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or set(value) != {"edits"}
        or not isinstance(edits, list)
        or not all(isinstance(e, dict) and isinstance(e.get("type"), str) for e in edits)
    ):
        raise InputError(
            'the request\'s \'context_management\' is not {"edits": [{"type": ...}, ...]}.'
        )
    for edit in edits:
        if edit["type"] not in bound.allowed:
            raise _outside(
                policy,
                "context_management",
                f"the request asks for context edit {edit['type'][:64]!r}",
            )
    return value


def _betas(policy: Policy, bound: CallerChoice, value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(b, str) and b for b in value):
        raise InputError("the request's anthropic-beta values are not a list of names.")
    for beta in value:
        if beta not in bound.allowed:
            raise _outside(policy, "betas", f"the request sends anthropic-beta {beta[:64]!r}")
    return tuple(value)


def _refuse_forced_choice_with_thinking(policy: Policy, parts: CallerParts) -> None:
    thinking = parts.thinking or policy.generation.thinking
    choice = parts.tool_choice
    if (
        choice is not None
        and choice["type"] in ("any", "tool")
        and thinking is not None
        and thinking.type != "disabled"
    ):
        raise InputError(
            f"the request forces a tool call (tool_choice {choice['type']!r}) with thinking "
            f"{thinking.type!r}, which the provider refuses.",
            hint='Use tool_choice {"type": "auto"}, or turn thinking off for this request.',
        )
