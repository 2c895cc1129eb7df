"""Rules about the output contract and reproducibility."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gateway.policy._findings import Finding, error, warning
from gateway.policy.rules._subject import Rule, Subject


def json_without_schema(s: Subject) -> Iterator[Finding]:
    if s.policy.output.format == "json" and not s.policy.output.has_schema:
        yield error(
            "json-without-schema",
            s.file,
            "output.schema_file",
            "JSON output is required but no JSON schema says what the JSON must contain, so "
            "answers cannot be checked.",
            "Add schema_file = 'schemas/<name>.json' to [output].",
        )


def json_unsupported_model(s: Subject) -> Iterator[Finding]:
    if s.policy.output.format == "json" and s.model is not None and not s.model.structured_outputs:
        yield error(
            "json-unsupported-model",
            s.file,
            "output.format",
            f"The model {s.model_id!r} cannot be held to a JSON schema (no structured outputs).",
            "Pin a model with structured outputs ('gateway models list' shows them), or use "
            "format = 'text'.",
        )


def schema_ignored(s: Subject) -> Iterator[Finding]:
    if s.policy.output.format != "json" and s.policy.output.has_schema:
        yield warning(
            "schema-ignored",
            s.file,
            "output.schema_file",
            "A JSON schema is given but the output format is 'text', so it is never used.",
            "Set format = 'json' or remove schema_file.",
        )


def temperature_nondeterministic(s: Subject) -> Iterator[Finding]:
    if not (s.policy.reproducible or s.policy.output.format == "json"):
        return
    temp = s.policy.generation.temperature
    # Unset on a model that honours sampling means the provider's default of 1.0.
    honours = s.model is None or s.model.honours_sampling
    if (temp is not None and temp > 0) or (temp is None and honours and s.model is not None):
        shown = temp if temp is not None else "the default 1.0"
        kind = "reproducible" if s.policy.reproducible else "JSON"
        yield warning(
            "temperature-nondeterministic",
            s.file,
            "generation.temperature",
            f"This {kind} task samples at temperature {shown}, so a new call can give a "
            "different answer.",
            "Set temperature = 0 (it narrows, but does not remove, variation; replay is what "
            "makes answers repeatable).",
        )


def reproducible_needs_replay(s: Subject) -> Iterator[Finding]:
    if s.policy.reproducible and s.policy.cache.mode != "replay":
        yield error(
            "reproducible-needs-replay",
            s.file,
            "cache.mode",
            "The task is marked reproducible but cache mode is "
            f"{s.policy.cache.mode!r}: the model itself never guarantees the same answer twice.",
            "Set mode = 'replay' in [cache] so identical requests get the recorded answer.",
        )


def cache_shared_across_callers(s: Subject) -> Iterator[Finding]:
    if s.policy.cache.mode == "replay" and s.policy.cache.scope == "task":
        yield warning(
            "cache-shared-across-callers",
            s.file,
            "cache.scope",
            "Recorded answers of this task are shared across callers: a desk is served, and "
            "learns of, another desk's identical question. Behind an information barrier "
            "(Chinese wall, MNPI) that is a leak.",
            "Keep scope = 'caller' (the default) unless every caller of this task may see "
            "every other caller's questions; record that approval with the policy.",
        )


def verdict_pattern(s: Subject) -> Iterator[Finding]:
    pattern = s.policy.output.verdict
    if pattern is None:
        return
    try:
        groups = re.compile(pattern).groups
    except re.error as exc:
        problem = f"is not a regular expression ({exc})"
    else:
        problem = "" if groups == 1 else f"has {groups} groups, not one"
    if problem:
        yield error(
            "verdict-pattern",
            s.file,
            "output.verdict",
            f"The verdict pattern {pattern!r} {problem}, so no verdict can be read from an answer.",
            "Write one group around the verdict: '<verdict>\\s*(PASS|BLOCK)\\s*</verdict>'.",
        )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    json_without_schema,
    json_unsupported_model,
    schema_ignored,
    temperature_nondeterministic,
    reproducible_needs_replay,
    cache_shared_across_callers,
    verdict_pattern,
)
