"""Rules about temperature, top_p and top_k: honoured by the model, combined legally, in range."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error
from gateway.policy.rules._subject import Rule, Subject

SAMPLING_KEYS = ("temperature", "top_p", "top_k")


def sampling_unsupported(s: Subject) -> Iterator[Finding]:
    if s.model is None or s.model.honours_sampling:
        return
    for key in SAMPLING_KEYS:
        value = getattr(s.policy.generation, key)
        if value is not None:
            yield error(
                "sampling-unsupported",
                s.file,
                f"generation.{key}",
                f"The model {s.model_id!r} always samples with its own defaults and rejects "
                f"{key}, so the mandated {key} = {value} would not be honoured.",
                f"Remove {key} (for reproducible answers use cache mode 'replay'), or pin a "
                "model that honours it, such as 'claude-sonnet-4-6'.",
            )


def temperature_and_top_p(s: Subject) -> Iterator[Finding]:
    g = s.policy.generation
    if s.model is None or s.model.sampling != "temperature-or-top-p":
        return
    if g.temperature is not None and g.top_p is not None:
        yield error(
            "sampling-temperature-and-top-p",
            s.file,
            "generation.top_p",
            f"The model {s.model_id!r} accepts temperature or top_p, never both; the provider "
            "rejects every request that sets both.",
            "Keep only one of them (usually temperature).",
        )


def top_k_unsupported(s: Subject) -> Iterator[Finding]:
    m = s.model
    # On a defaults-only model sampling-unsupported already reports top_k.
    if m is None or not m.honours_sampling or m.top_k or s.policy.generation.top_k is None:
        return
    yield error(
        "sampling-top-k-unsupported",
        s.file,
        "generation.top_k",
        f"The model {s.model_id!r} does not accept top_k.",
        "Remove top_k from the policy.",
    )


def _top_p_ok(top_p: float, zero_allowed: bool) -> bool:
    return 0 <= top_p <= 1 if zero_allowed else 0 < top_p <= 1


def sampling_out_of_range(s: Subject) -> Iterator[Finding]:
    g = s.policy.generation
    # The ranges are the model's catalog facts: the Messages API accepts temperature 0..1;
    # the local model samples exactly at any temperature (the experiment's defaults go to
    # 1.2, so it allows up to 2), and its sampler needs a non-empty nucleus (top_p above 0).
    t_max = s.model.max_temperature if s.model is not None else 1.0
    zero_ok = s.model.top_p_zero if s.model is not None else True
    checks = (
        (
            "temperature",
            g.temperature,
            g.temperature is not None and not 0 <= g.temperature <= t_max,
        ),
        ("top_p", g.top_p, g.top_p is not None and not _top_p_ok(g.top_p, zero_ok)),
        ("top_k", g.top_k, g.top_k is not None and g.top_k < 1),
    )
    allowed = {
        "temperature": f"between 0 and {t_max:g}",
        "top_p": "between 0 and 1" if zero_ok else "above 0 and at most 1",
        "top_k": "1 or more",
    }
    for key, value, bad in checks:
        if bad:
            yield error(
                "sampling-out-of-range",
                s.file,
                f"generation.{key}",
                f"{key} = {value} is outside the range the provider accepts.",
                f"Set {key} {allowed[key]}.",
            )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    sampling_unsupported,
    temperature_and_top_p,
    top_k_unsupported,
    sampling_out_of_range,
)
