"""Rules about extended thinking and effort: supported by the model, compatible with sampling."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error, warning
from gateway.policy.rules._subject import Rule, Subject

MIN_BUDGET_TOKENS = 1024
MIN_TOP_P_WITH_THINKING = 0.95


def _thinking_on(s: Subject) -> bool:
    t = s.policy.generation.thinking
    return t is not None and t.type != "disabled"


def thinking_unsupported(s: Subject) -> Iterator[Finding]:
    t = s.policy.generation.thinking
    if s.model is None or t is None or t.type in s.model.thinking_types:
        return
    supported = ", ".join(repr(x) for x in s.model.thinking_types) or "none"
    advice = (
        "Use type = 'adaptive': this model decides its own thinking budget."
        if t.type == "enabled" and "adaptive" in s.model.thinking_types
        else f"Use one of the thinking types it supports ({supported}) or remove thinking."
    )
    yield error(
        "thinking-unsupported",
        s.file,
        "generation.thinking.type",
        f"The model {s.model_id!r} does not accept thinking type {t.type!r}.",
        advice,
    )


def thinking_deprecated(s: Subject) -> Iterator[Finding]:
    t = s.policy.generation.thinking
    if s.model is not None and t is not None and t.type in s.model.deprecated_thinking_types:
        yield warning(
            "thinking-deprecated",
            s.file,
            "generation.thinking.type",
            f"Thinking type {t.type!r} is deprecated on {s.model_id!r} and may stop working.",
            "Prefer type = 'adaptive'.",
        )


def _sampling_checked(s: Subject) -> bool:
    # On a defaults-only model every sampling key is already an error (sampling-unsupported).
    return _thinking_on(s) and (s.model is None or s.model.honours_sampling)


def thinking_temperature(s: Subject) -> Iterator[Finding]:
    temp = s.policy.generation.temperature
    if _sampling_checked(s) and temp is not None and temp != 1:
        yield error(
            "thinking-temperature",
            s.file,
            "generation.temperature",
            f"With thinking on, the provider only accepts temperature = 1, not {temp}.",
            "Remove temperature (or set it to 1), or turn thinking off.",
        )


def thinking_top_k(s: Subject) -> Iterator[Finding]:
    if _sampling_checked(s) and s.policy.generation.top_k is not None:
        yield error(
            "thinking-top-k",
            s.file,
            "generation.top_k",
            "With thinking on, the provider rejects top_k.",
            "Remove top_k, or turn thinking off.",
        )


def thinking_top_p(s: Subject) -> Iterator[Finding]:
    top_p = s.policy.generation.top_p
    if _sampling_checked(s) and top_p is not None and top_p < MIN_TOP_P_WITH_THINKING:
        yield error(
            "thinking-top-p",
            s.file,
            "generation.top_p",
            f"With thinking on, top_p must be between 0.95 and 1; {top_p} is rejected.",
            "Raise top_p to at least 0.95, remove it, or turn thinking off.",
        )


def thinking_budget(s: Subject) -> Iterator[Finding]:
    t = s.policy.generation.thinking
    if t is None:
        return
    key = "generation.thinking.budget_tokens"
    max_tokens = s.policy.generation.max_tokens
    if t.type != "enabled":
        if t.budget_tokens is not None:
            yield error(
                "thinking-budget",
                s.file,
                key,
                f"budget_tokens only applies to thinking type 'enabled', not {t.type!r}.",
                "Remove budget_tokens.",
            )
        return
    if t.budget_tokens is None:
        yield error(
            "thinking-budget",
            s.file,
            key,
            "Thinking type 'enabled' needs a budget_tokens value.",
            f"Set budget_tokens to at least {MIN_BUDGET_TOKENS} and below max_tokens.",
        )
    elif t.budget_tokens < MIN_BUDGET_TOKENS:
        yield error(
            "thinking-budget",
            s.file,
            key,
            f"budget_tokens = {t.budget_tokens} is below the minimum of {MIN_BUDGET_TOKENS}.",
            f"Set budget_tokens to at least {MIN_BUDGET_TOKENS}.",
        )
    elif max_tokens is not None and t.budget_tokens >= max_tokens:
        yield error(
            "thinking-budget",
            s.file,
            key,
            f"budget_tokens = {t.budget_tokens} is not below max_tokens = {max_tokens}; the "
            "thinking would leave no room for the answer.",
            "Lower budget_tokens or raise max_tokens.",
        )


def effort_unsupported(s: Subject) -> Iterator[Finding]:
    effort = s.policy.generation.effort
    if s.model is None or effort is None or effort in s.model.effort_levels:
        return
    levels = ", ".join(repr(x) for x in s.model.effort_levels) or "none"
    yield error(
        "effort-unsupported",
        s.file,
        "generation.effort",
        f"The model {s.model_id!r} does not accept effort {effort!r} (it accepts: {levels}).",
        "Choose a supported effort level or remove effort.",
    )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    thinking_unsupported,
    thinking_deprecated,
    thinking_temperature,
    thinking_top_k,
    thinking_top_p,
    thinking_budget,
    effort_unsupported,
)
