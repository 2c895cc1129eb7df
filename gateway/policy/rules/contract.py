"""Rules about the caller contract: the parts of a request a policy lets callers bring (their
own system prompt, tools, schema, thinking, metadata, context edits, beta features).

An opened part needs a bound; it must not contradict what the policy itself mandates; it must
be something the model can do. Grants a reviewer should weigh are warnings: provider-run
tools, context edits, and the broad grant (own system prompt, own tools, no output check).
"""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._contract_text import broad_grant
from gateway.policy._findings import Finding, error, warning
from gateway.policy._schema import CallerChoice
from gateway.policy.rules._subject import Rule, Subject


def contract_unbounded(s: Subject) -> Iterator[Finding]:
    c = s.policy.caller
    missing: list[tuple[str, str]] = []
    if c.system is not None and c.system.mode != "policy" and c.system.max_bytes is None:
        missing.append(("system", "max_bytes"))
    if c.tools is not None:
        missing += [("tools", k) for k in ("max_count", "max_bytes") if getattr(c.tools, k) is None]
        if not c.tools.allow:
            missing.append(("tools", "allow"))
    if c.output is not None and c.output.json_schema and c.output.max_bytes is None:
        missing.append(("output", "max_bytes"))
    if c.thinking is not None:
        if not c.thinking.allowed:
            missing.append(("thinking", "allowed"))
        if "enabled" in c.thinking.allowed and c.thinking.max_budget_tokens is None:
            missing.append(("thinking", "max_budget_tokens"))
    for key in ("metadata", "context_management", "betas"):
        choice = getattr(c, key)
        if isinstance(choice, CallerChoice) and not choice.allowed:
            missing.append((key, "allowed"))
    for key, bound in missing:
        yield error(
            "caller-part-unbounded",
            s.file,
            f"caller.{key}.{bound}",
            f"Callers may bring their own {key.replace('_', ' ')}, but [caller] {key} sets no "
            f"{bound}: nothing bounds what they send.",
            f"Set {bound} in [caller] {key}, or remove {key} from [caller].",
        )


def contract_conflicts(s: Subject) -> Iterator[Finding]:
    p, c = s.policy, s.policy.caller
    if c.tools is not None and p.tools.definitions is not None:
        yield error(
            "caller-tools-conflict",
            s.file,
            "caller.tools",
            "The policy declares its own tools ([tools] file) and also lets callers bring "
            "theirs; a request can have one set only.",
            "Keep either [tools] file (the policy's tools) or [caller] tools (the caller's).",
        )
    if c.output is not None and c.output.json_schema and p.output.format == "json":
        yield error(
            "caller-output-conflict",
            s.file,
            "caller.output",
            'The policy mandates its own output schema ([output] format = "json") and also '
            "lets callers bring theirs.",
            "Keep either the policy's schema or [caller] output.",
        )
    if c.metadata is not None and c.forward_user_id and "user_id" in c.metadata.allowed:
        yield error(
            "caller-metadata-conflict",
            s.file,
            "caller.metadata",
            "The gateway forwards its own caller identifier as metadata.user_id "
            "(forward_user_id = true), and callers may also send user_id.",
            "Remove user_id from [caller] metadata, or forward_user_id.",
        )


def contract_unsupported(s: Subject) -> Iterator[Finding]:
    c, model = s.policy.caller, s.model
    if model is None:
        return
    if c.thinking is not None:
        bad = [t for t in c.thinking.allowed if t not in model.thinking_types]
        if bad:
            yield error(
                "caller-thinking-unsupported",
                s.file,
                "caller.thinking.allowed",
                f"Callers may choose thinking type(s) {bad}, which {s.model_id!r} does not accept.",
                f"Allow only types the model accepts: {list(model.thinking_types) or 'none'}.",
            )
    if c.output is not None and c.output.json_schema and not model.structured_outputs:
        yield error(
            "caller-output-unsupported",
            s.file,
            "caller.output",
            f"Callers may bring a JSON schema, but {s.model_id!r} cannot hold an answer to one.",
            "Pin a model with structured outputs ('gateway models list'), or remove it.",
        )
    top = s.policy.caller.max_tokens
    budget = c.thinking.max_budget_tokens if c.thinking is not None else None
    if budget is not None and top is not None and top.max is not None and budget >= top.max:
        yield error(
            "caller-thinking-budget",
            s.file,
            "caller.thinking.max_budget_tokens",
            f"The largest thinking budget callers may ask for ({budget:,}) is not below the "
            f"largest max_tokens they may ask for ({top.max:,.0f}); the provider refuses a "
            "budget that is not below max_tokens.",
            "Lower max_budget_tokens below [caller] max_tokens max.",
        )


def contract_risks(s: Subject) -> Iterator[Finding]:
    c = s.policy.caller
    if c.tools is not None and c.tools.server:
        yield warning(
            "caller-server-tools",
            s.file,
            "caller.tools.server",
            f"Callers may give the model provider-run tools ({', '.join(c.tools.server)}): they "
            "run at the provider and reach the outside world, so those answers cannot be "
            "replayed and what the model fetched is not in the request.",
            "Allow server tools only where the task needs them, and name exact versions.",
        )
    if c.context_management is not None:
        yield warning(
            "caller-context-edits",
            s.file,
            "caller.context_management",
            "Callers may ask the provider to edit the conversation before the model reads it: "
            "the model then reads less than the recorded request holds.",
            "Allow context edits only for long agent sessions that need them.",
        )
    if broad_grant(s.policy):
        yield warning(
            "caller-broad-grant",
            s.file,
            "caller",
            "Callers bring their own system prompt and their own tools, and no answer is "
            "checked against a schema: the task can be made to do almost anything, and only "
            "the recorded requests show what it did.",
            "Confirm the task is meant as a general-purpose channel, restrict tool names "
            "(allow/deny), or open [caller] output so answers are checked.",
        )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    contract_unbounded,
    contract_conflicts,
    contract_unsupported,
    contract_risks,
)
