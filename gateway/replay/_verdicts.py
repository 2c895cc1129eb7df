"""The categorical part of an answer (its verdict), for a migration report's flip matrix.

    key = verdict_key(policy)                   # how this task's answers carry a verdict
    verdict_of(key, text)                       # "BLOCK", or None when the answer has none

A task has a verdict when its policy declares one: a text answer's ``[output] verdict``
pattern (its one group is the verdict), or a JSON answer's schema property whose values
are an enum of strings (the first such top-level property, in the schema's order).
A verdict is read as production would read it, from the answer's text (or its JSON).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gateway.policy import Policy

__all__ = ["VerdictKey", "verdict_key", "verdict_of"]

# A policy's pattern runs on model output: on at most this much of it (an answer is bounded
# by max_tokens anyway; this bounds the regular expression's work, whatever the answer).
SCANNED = 200_000


@dataclass(frozen=True)
class VerdictKey:
    """Where a task's answers carry their verdict: a pattern's group, or a JSON property."""

    pattern: re.Pattern[str] | None = None
    field: str | None = None

    @property
    def describes(self) -> str:
        if self.pattern is not None:
            return f"the verdict pattern {self.pattern.pattern!r}"
        return f"the schema's enum property {self.field!r}"


def verdict_key(policy: Policy | None) -> VerdictKey | None:
    """How ``policy``'s answers carry a verdict, None when they carry none."""
    if policy is None:
        return None
    if policy.output.verdict is not None:
        try:
            pattern = re.compile(policy.output.verdict)
        except re.error:  # review refuses such a policy; a recorded one is read as it is
            return None
        return VerdictKey(pattern=pattern) if pattern.groups == 1 else None
    schema = policy.output.json_schema
    if policy.output.format != "json" or not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    for name, spec in (properties or {}).items() if isinstance(properties, dict) else ():
        enum = spec.get("enum") if isinstance(spec, dict) else None
        if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
            return VerdictKey(field=str(name))
    return None


def verdict_of(key: VerdictKey | None, text: str) -> str | None:
    """The verdict of an answer whose text (a JSON answer's JSON text) is ``text``."""
    if key is None:
        return None
    if key.pattern is not None:
        found = key.pattern.search(text[:SCANNED])
        return found.group(1) if found is not None and found.group(1) is not None else None
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    got = value.get(key.field) if isinstance(value, dict) else None
    return got if isinstance(got, str) else None
