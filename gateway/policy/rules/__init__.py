"""The review rules: each one small function from a Subject to findings.

    findings = check(Subject.of_policy(policy, model, today=date.today()))

The order of RULES is the order findings are reported in.
"""

from __future__ import annotations

from gateway.policy._findings import Finding
from gateway.policy.rules._subject import Rule, Subject
from gateway.policy.rules.caller import caller_out_of_range, caller_unbounded, caller_undefined_key
from gateway.policy.rules.model import model_alias, model_retired, model_retiring, model_unknown
from gateway.policy.rules.output import (
    cache_shared_across_callers,
    json_unsupported_model,
    json_without_schema,
    reproducible_needs_replay,
    schema_ignored,
    temperature_nondeterministic,
)
from gateway.policy.rules.sampling import (
    sampling_out_of_range,
    sampling_unsupported,
    temperature_and_top_p,
    top_k_unsupported,
)
from gateway.policy.rules.thinking import (
    effort_unsupported,
    thinking_budget,
    thinking_deprecated,
    thinking_temperature,
    thinking_top_k,
    thinking_top_p,
    thinking_unsupported,
)
from gateway.policy.rules.tokens import (
    max_tokens_missing,
    max_tokens_range,
    max_tokens_streaming,
    stop_sequence_blank,
)
from gateway.policy.rules.tools import (
    tool_choice_forced_with_thinking,
    tool_choice_unknown,
    tool_server_not_allowed,
    tool_strict_unsupported,
)

RULES: tuple[Rule, ...] = (
    model_unknown,
    model_alias,
    model_retired,
    model_retiring,
    sampling_unsupported,
    temperature_and_top_p,
    top_k_unsupported,
    sampling_out_of_range,
    thinking_unsupported,
    thinking_deprecated,
    thinking_temperature,
    thinking_top_k,
    thinking_top_p,
    thinking_budget,
    effort_unsupported,
    max_tokens_missing,
    max_tokens_range,
    max_tokens_streaming,
    stop_sequence_blank,
    json_without_schema,
    json_unsupported_model,
    schema_ignored,
    temperature_nondeterministic,
    reproducible_needs_replay,
    cache_shared_across_callers,
    caller_undefined_key,
    caller_unbounded,
    caller_out_of_range,
    tool_choice_unknown,
    tool_choice_forced_with_thinking,
    tool_strict_unsupported,
    tool_server_not_allowed,
)


def check(subject: Subject) -> list[Finding]:
    return [finding for rule in RULES for finding in rule(subject)]


__all__ = ["RULES", "Subject", "check"]
