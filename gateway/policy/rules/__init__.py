"""The review rules: each one small function from a Subject (a policy and its model) to
findings, grouped by what they look at; each module lists its own ``RULES``.

    findings = check(Subject.of_policy(policy, model, today=date.today()))

The order of RULES is the order findings are reported in.
"""

from gateway.policy.rules._all_rules import RULES, check
from gateway.policy.rules._subject import Subject

__all__ = ["RULES", "Subject", "check"]
