"""What the gateway reads out of a model's answer: its text, and for JSON tasks the checked value.

check = check_json_output(response_text(response), schema)
check.ok, check.value, check.problem        # problem never quotes the output itself

A model's answer is untrusted input, so both steps are bounded. ``load_json`` refuses text
larger than MAX_JSON_CHARS or nested deeper than MAX_JSON_DEPTH before ``json.loads`` sees it
(which recurses once per level). The schema's ``pattern`` and ``patternProperties`` run on
RE2, whose matching time is linear in the text, so no pattern can make a check hang; a
pattern RE2 cannot run (a lookaround or a backreference) fails the check rather than falling
back to a backtracking engine.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

MAX_JSON_DEPTH = 64
MAX_JSON_CHARS = 4 * 1024 * 1024  # several times the longest answer any model can give

# One token per string literal (an unterminated one runs to the end) or bracket: the scan
# is linear, and brackets inside strings are never counted.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


class JSONLimitError(ValueError):
    """JSON text too large or too deeply nested to be parsed safely."""


def response_text(response: Mapping[str, Any]) -> str:
    blocks = response.get("content") or []
    return "".join(
        block.get("text", "")
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def json_depth(text: str, *, stop_above: int) -> int:
    """How deeply ``text`` nests arrays and objects, counted up to ``stop_above + 1``."""
    if text.count("[") + text.count("{") <= stop_above:
        return 0  # cannot nest deeper than it has brackets: the common case costs two counts
    depth = deepest = 0
    for token in _JSON_TOKEN.finditer(text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_above:
                    break
        elif mark in "]}":
            depth -= 1
    return deepest


def load_json(
    text: str, *, max_depth: int = MAX_JSON_DEPTH, max_chars: int = MAX_JSON_CHARS
) -> Any:
    """``json.loads`` with bounds; NaN and Infinity are refused (JSON has no such numbers).

    Raises JSONLimitError past the bounds, json.JSONDecodeError for text that is not JSON,
    and ValueError for NaN, Infinity or an integer too long to convert.
    """
    if len(text) > max_chars:
        raise JSONLimitError(f"it is longer than {max_chars:,} characters")
    if json_depth(text, stop_above=max_depth) > max_depth:
        raise JSONLimitError(f"it nests arrays or objects more than {max_depth} levels deep")
    return json.loads(text, parse_constant=_reject_constant)


@dataclass(frozen=True)
class OutputCheck:
    ok: bool
    value: Any = None
    problem: str | None = None

    def record(self) -> dict[str, Any]:
        return {"checked": True, "ok": self.ok, "problem": self.problem}


class PatternUnavailable(jsonschema.ValidationError):  # type: ignore[misc]  # untyped base
    """A schema pattern the linear-time engine cannot run."""


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is reported as a finding, not on stderr


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, options=_RE2_OPTIONS)


def pattern_runs_in_linear_time(pattern: str) -> bool:
    """Whether the JSON check can run ``pattern`` (RE2 has no lookarounds or backreferences)."""
    try:
        _compiled(pattern)
    except re2.error:
        return False
    return True


def _search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text``; re2.error if RE2 cannot run it."""
    try:
        return _compiled(pattern).search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form, so nothing to match
        return False


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = _search(pattern, instance)
    except re2.error:
        yield PatternUnavailable("the schema pattern cannot be checked in bounded time")
        return
    if not matched:
        yield jsonschema.ValidationError("the value does not match the schema pattern")


def _matching(validator: Any, patterns: Any, key: str) -> Iterator[str | PatternUnavailable]:
    for pattern in patterns:
        try:
            if _search(pattern, key):
                yield pattern
        except re2.error:
            yield PatternUnavailable("the schema pattern cannot be checked in bounded time")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for key, value in instance.items():
        for found in _matching(validator, patterns, key):
            if isinstance(found, PatternUnavailable):
                yield found
            else:
                yield from validator.descend(value, patterns[found], path=key, schema_path=found)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    # jsonschema's own keyword matches patternProperties with Python's re; this is the same
    # keyword on RE2.
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = []
    for key in instance:
        if key in properties:
            continue
        found = list(_matching(validator, patterns, key))
        unavailable = [f for f in found if isinstance(f, PatternUnavailable)]
        if unavailable:
            yield unavailable[0]
            return
        if not found:
            extras.append(key)
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif not additional and extras:
        yield jsonschema.ValidationError("additional properties are not allowed")


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


def schema_loops(schema: Mapping[str, Any], value: Any = None) -> bool:
    """Whether checking ``value`` against ``schema`` never ends (a ``$ref`` cycle)."""
    return _schema_problem(schema, value) == _LOOPING


_LOOPING = "the schema cannot be applied: its $ref references loop without end"


def _schema_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    try:
        error = jsonschema.exceptions.best_match(_Validator(schema).iter_errors(value))
    except RecursionError:
        # The answer and the schema are both bounded in depth, so only a $ref that leads
        # back to itself without descending recurses this far; the limit is its only bound.
        return _LOOPING
    if isinstance(error, PatternUnavailable):
        return (
            f"the schema's pattern at {error.json_path} cannot be checked in bounded time "
            "(it uses a lookaround or a backreference)"
        )
    if error is not None:
        return f"the output breaks the schema at {error.json_path} ({error.validator})"
    return None


def check_json_output(text: str, schema: Mapping[str, Any] | None) -> OutputCheck:
    """Parse and validate a JSON answer. The problem never quotes the output itself."""
    try:
        value = load_json(text)
    except JSONLimitError as exc:
        return OutputCheck(ok=False, problem=f"the output is not checkable JSON: {exc}")
    except json.JSONDecodeError as exc:
        return OutputCheck(
            ok=False, problem=f"the output is not valid JSON (line {exc.lineno} column {exc.colno})"
        )
    except ValueError as exc:
        kind = "NaN or Infinity" if "not valid JSON" in str(exc) else "a number too long"
        return OutputCheck(ok=False, problem=f"the output is not valid JSON ({kind})")
    problem = _schema_problem(schema, value) if schema is not None else None
    if problem is not None:
        return OutputCheck(ok=False, problem=problem)
    return OutputCheck(ok=True, value=value)
