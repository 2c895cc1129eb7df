"""Rules about the [caller] table: what callers may choose, within which bounds."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error
from gateway.policy._schema import CallerChoice, CallerRange
from gateway.policy.rules._subject import Rule, Subject

INTEGER_KEYS = ("max_tokens", "top_k")


def natural_range(key: str, s: Subject) -> tuple[float, float | None]:
    """The range the provider accepts for a key (None: no upper limit known)."""
    if key in ("temperature", "top_p"):
        return 0.0, 1.0
    if key == "max_tokens":
        return 1, (s.model.max_output_tokens if s.model is not None else None)
    return 1, None


def caller_undefined_key(s: Subject) -> Iterator[Finding]:
    for key in s.policy.caller.opened():
        if getattr(s.policy.generation, key) is None:
            yield error(
                "caller-undefined-key",
                s.file,
                f"caller.{key}",
                f"Callers may choose {key}, but the policy itself does not set {key}, so there "
                "is no reviewed default.",
                f"Set {key} in [generation] or remove it from [caller].",
            )


def caller_unbounded(s: Subject) -> Iterator[Finding]:
    for key, bound in s.policy.caller.opened().items():
        if isinstance(bound, CallerRange) and bound.max is None:
            yield error(
                "caller-unbounded",
                s.file,
                f"caller.{key}",
                f"Callers may raise {key} without an upper limit.",
                f"Give the range a maximum, e.g. {key} = {{ max = ... }}.",
            )
        elif isinstance(bound, CallerChoice) and not bound.allowed:
            yield error(
                "caller-unbounded",
                s.file,
                f"caller.{key}",
                f"The list of {key} values callers may choose is empty.",
                f"List the allowed values or remove {key} from [caller].",
            )


def caller_out_of_range(s: Subject) -> Iterator[Finding]:
    for key, bound in s.policy.caller.opened().items():
        where = f"caller.{key}"
        if isinstance(bound, CallerChoice):
            levels = s.model.effort_levels if s.model is not None else bound.allowed
            bad = [v for v in bound.allowed if v not in levels]
            if bad:
                yield error(
                    "caller-out-of-range",
                    s.file,
                    where,
                    f"Callers may choose {key} {bad}, which the model does not accept.",
                    f"Allow only values the model accepts: {list(levels)}.",
                )
            continue
        low, high = natural_range(key, s)
        ends = [v for v in (bound.min, bound.max) if v is not None]
        outside = [v for v in ends if v < low or (high is not None and v > high)]
        fractional = key in INTEGER_KEYS and any(v != int(v) for v in ends)
        inverted = bound.min is not None and bound.max is not None and bound.min > bound.max
        if outside or fractional or inverted:
            limit = f"{low} to {high}" if high is not None else f"{low} or more"
            yield error(
                "caller-out-of-range",
                s.file,
                where,
                f"The caller range for {key} (min {bound.min}, max {bound.max}) is not a valid "
                f"range within what the provider accepts ({limit}).",
                f"Use min <= max within {limit}"
                + (", whole numbers" if key in INTEGER_KEYS else "")
                + ".",
            )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    caller_undefined_key,
    caller_unbounded,
    caller_out_of_range,
)
