"""Every review rule in the order findings are reported in, and the check that runs them."""

from __future__ import annotations

from gateway.policy._findings import Finding
from gateway.policy.rules import (
    caller,
    contract,
    model,
    output,
    retention,
    sampling,
    thinking,
    tokens,
    tools,
    transport,
)
from gateway.policy.rules._subject import Rule, Subject

RULES: tuple[Rule, ...] = (
    *model.RULES,
    *transport.RULES,
    *sampling.RULES,
    *thinking.RULES,
    *tokens.RULES,
    *output.RULES,
    *caller.RULES,
    *contract.RULES,
    *tools.RULES,
    *retention.RULES,
)


def check(subject: Subject) -> list[Finding]:
    return [finding for rule in RULES for finding in rule(subject)]


__all__ = ["RULES", "check"]
