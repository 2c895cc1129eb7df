"""Rules about the pinned model itself: known, pinned, not retired, not retiring soon."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from gateway.policy._findings import Finding, error, warning
from gateway.policy.rules._subject import Rule, Subject

RETIRING_WARNING_DAYS = 90
KEY = "model.id"


def model_unknown(s: Subject) -> Iterator[Finding]:
    if s.model is None:
        yield error(
            "model-unknown",
            s.file,
            KEY,
            f"The model {s.model_id!r} is not in the gateway's model catalog, so nothing is "
            "known about which settings it honours.",
            "Use a pinned model id listed by 'gateway models list', or have the catalog "
            "override reviewed to add this model.",
        )


def model_alias(s: Subject) -> Iterator[Finding]:
    if s.model is not None and not s.model.pinned:
        target = s.model.alias_of
        yield error(
            "model-alias",
            s.file,
            KEY,
            f"{s.model_id!r} is an alias: the vendor can point it at a different model without "
            f"notice (today it means {target!r}), so answers could change silently.",
            f"Pin the exact model id {target!r} instead."
            if target
            else "Pin an exact model id instead.",
        )


def _past_retirement(s: Subject) -> bool:
    m = s.model
    return m is not None and m.retires_at is not None and m.retires_at <= s.today


def model_retired(s: Subject) -> Iterator[Finding]:
    m = s.model
    if m is None or not (m.lifecycle == "retired" or _past_retirement(s)):
        return
    if m.retires_at is not None and m.retires_at <= s.today:
        when = f" retired on {m.retires_at.isoformat()}"
        stale = (
            f" (the catalog still calls it {m.lifecycle}: refresh it with 'gateway models sync')"
            if m.lifecycle != "retired"
            else ""
        )
        message = f"The model {s.model_id!r}{when}{stale}; the provider no longer serves it."
    else:
        message = f"The model {s.model_id!r} is retired; the provider no longer serves it."
    yield error(
        "model-retired",
        s.file,
        KEY,
        message,
        "Move the task to an active model and review the policy again.",
    )


def model_retiring(s: Subject) -> Iterator[Finding]:
    m = s.model
    if m is None or m.lifecycle == "retired" or _past_retirement(s):
        return  # model-retired says it
    soon = m.retires_at is not None and m.retires_at <= s.today + timedelta(RETIRING_WARNING_DAYS)
    if m.lifecycle == "deprecated" or soon:
        when = f" and retires on {m.retires_at.isoformat()}" if m.retires_at else ""
        state = "is deprecated" if m.lifecycle == "deprecated" else "is still active"
        yield warning(
            "model-retiring",
            s.file,
            KEY,
            f"The model {s.model_id!r} {state}{when}; requests will fail once it is retired.",
            "Plan the move to a newer model now and replay recorded requests against it "
            "('gateway replay --model ...') to see what would change.",
        )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    model_unknown,
    model_alias,
    model_retired,
    model_retiring,
)
