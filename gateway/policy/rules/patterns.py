"""The rule on a JSON schema's regular expressions: every one must be checkable in bounded time.

    findings = schema_pattern_unsafe(schema, "risk_report.toml")

A pattern with a repetition inside a repetition (``(a+)+``, ``(a*)*``, ``(\\w+\\s?)*``) or a
repeated choice whose branches start alike (``(a|a)*``, ``(a|ab)+``) can take minutes on a
30-character answer in a backtracking engine (catastrophic backtracking). The gateway checks
patterns with RE2, which cannot be stalled, but an auditor re-checking answers with another
tool, or the provider, may not; so review refuses such patterns, and patterns that RE2 cannot
run at all (lookarounds, backreferences), since every answer would fail the check.

This rule reads the schema file, not the policy's settings, so it runs where the schema is
read (``gateway.policy._files.read_output_schema``) rather than through ``RULES``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway._output_check import pattern_runs_in_linear_time
from gateway.policy._findings import Finding, error

RULE = "schema-pattern-unsafe"

# Keywords whose value is one subschema, a list of subschemas, or a name -> subschema map.
_ONE = (
    "additionalProperties", "unevaluatedProperties", "items", "additionalItems",
    "unevaluatedItems", "contains", "propertyNames", "not", "if", "then", "else",
)  # fmt: skip
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")

_COUNT = re.compile(r"\{(\d{1,9})(,(\d{0,9}))?\}")


def schema_pattern_unsafe(schema: Mapping[str, Any], file: str) -> Iterator[Finding]:
    for where, pattern in _patterns(schema):
        if not pattern_runs_in_linear_time(pattern):
            yield error(
                RULE,
                file,
                "output.schema_file",
                f"The schema's pattern at {where} uses a feature the gateway cannot check in "
                "bounded time (a lookaround such as (?=...) or a backreference such as \\1), so "
                "every answer would fail the JSON check.",
                "Rewrite the pattern without lookarounds or backreferences, or check that value "
                "with enum, minLength or maxLength instead.",
            )
        elif _backtracks(pattern):
            yield error(
                RULE,
                file,
                "output.schema_file",
                f"The schema's pattern at {where} repeats a part that can itself match in "
                "several ways (like (a+)+ or (a|a)*): a backtracking checker can take minutes "
                "on one short answer, so a crafted answer could stall anyone who re-checks it.",
                "Rewrite the pattern so no repeated group contains another repetition or "
                "alternatives that start alike, e.g. '^a+$' instead of '^(a+)+$'.",
            )


def _patterns(schema: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every (location, pattern) in the schema; the schema is already bounded in depth."""
    pending: list[tuple[str, Any]] = [("$", schema)]
    while pending:
        where, node = pending.pop()
        if not isinstance(node, Mapping):
            continue
        if isinstance(node.get("pattern"), str):
            yield f"{where}.pattern", node["pattern"]
        for keyword in _NAMED:
            children = node.get(keyword)
            if isinstance(children, Mapping):
                for name, child in children.items():
                    if keyword == "patternProperties":
                        yield f"{where}.patternProperties", str(name)
                    pending.append((f"{where}.{keyword}.{name}", child))
        for keyword in _ONE:
            if isinstance(node.get(keyword), Mapping):
                pending.append((f"{where}.{keyword}", node[keyword]))
        for keyword in _MANY:
            if isinstance(node.get(keyword), list):
                pending += [(f"{where}.{keyword}[{i}]", c) for i, c in enumerate(node[keyword])]


@dataclass
class _Group:
    repeats_inside: bool = False  # some part inside repeats a variable number of times
    firsts: list[str] = field(default_factory=list)  # each finished branch's first atom
    first: str | None = None  # this branch's first atom, once seen


def _backtracks(pattern: str) -> bool:
    """Whether ``pattern`` has a repetition inside a repetition, or a repeated choice whose
    branches start with the same atom. One pass, no recursion."""
    stack = [_Group()]
    i, n = 0, len(pattern)
    while i < n:
        start, ch = i, pattern[i]
        group: _Group | None = None
        if ch == "\\":
            i += 2
        elif ch == "[":
            i = _class_end(pattern, i)
        elif ch == "(":
            stack.append(_Group())
            i = _group_body(pattern, i)
            continue
        elif ch == ")" and len(stack) > 1:
            group = stack.pop()
            group.firsts.append(group.first or "")
            i += 1
        elif ch == "|":
            top = stack[-1]
            top.firsts.append(top.first or "")
            top.first = None
            i += 1
            continue
        else:
            i += 1
        atom = pattern[start:i]
        low, high, i = _quantifier(pattern, i)
        repeated = high is None or high > 1
        variable = high is None or high > max(low, 1)
        if group is not None:
            alike = len(group.firsts) > 1 and len(set(group.firsts)) < len(group.firsts)
            if repeated and (group.repeats_inside or alike):
                return True
        parent = stack[-1]
        if parent.first is None:
            parent.first = atom
        if variable or (group is not None and group.repeats_inside):
            parent.repeats_inside = True
    return False


def _group_body(pattern: str, i: int) -> int:
    """The index after ``(`` and its prefix (``?:``, ``?=``, ``?<name>``, ...), if any."""
    j = i + 1
    if pattern.startswith("?", j):
        j += 1
        if pattern.startswith(("<=", "<!"), j):
            j += 2
        elif pattern.startswith(("<", "P<"), j) and (end := pattern.find(">", j)) != -1:
            j = end + 1
        elif j < len(pattern) and pattern[j] in ":=!":
            j += 1
    return j


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class that starts at ``pattern[i] == '['``."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1  # a leading ']' is a literal
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _quantifier(pattern: str, i: int) -> tuple[int, int | None, int]:
    """The quantifier at ``i`` as (min, max or None for unbounded, index after it)."""
    if i >= len(pattern):
        return 1, 1, i
    ch = pattern[i]
    if ch in "*+?":
        low, high, i = (0 if ch != "+" else 1), (None if ch != "?" else 1), i + 1
    elif ch == "{" and (m := _COUNT.match(pattern, i)):
        low = int(m[1])
        high = low if m[2] is None else (int(m[3]) if m[3] else None)
        i = m.end()
    else:
        return 1, 1, i
    if i < len(pattern) and pattern[i] in "?+":
        i += 1  # lazy or possessive: the same repetition, tried in another order
    return low, high, i


__all__ = ["RULE", "schema_pattern_unsafe"]
