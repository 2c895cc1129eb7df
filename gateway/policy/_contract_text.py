"""The caller contract in words a compliance officer reads: what a caller may do on a task.

    for sentence in caller_grants(policy):
        print(sentence)        # "Callers may add their own system prompt ..."
    contract_kind(policy)      # "strict" or "opened"

`gateway policy review` prints these per task, `policy show` and the sign-off sheet as rows
(``gateway.policy._field_table``). The bounds are read from the same ``[caller]`` table the
planner enforces, so the words cannot say more or less than the gateway does.
"""

from __future__ import annotations

from typing import Literal

from gateway.policy._schema import CallerChoice, CallerRange, Policy, TokenRange

ContractKind = Literal["strict", "opened"]


def contract_kind(policy: Policy) -> ContractKind:
    """ "opened" when a caller may bring a part of the request (its own system prompt, tools,
    schema, thinking, ...); "strict" when everything but the listed values is the policy's."""
    return "opened" if policy.caller.is_open else "strict"


def broad_grant(policy: Policy) -> bool:
    """A caller's own system prompt and own tools, and no check of the answer: a caller can
    make the task into anything, and nothing the gateway checks says what came back."""
    parts = policy.caller.parts()
    output = policy.caller.output
    checked = policy.output.format == "json" or (output is not None and output.json_schema)
    return "system" in parts and "tools" in parts and not checked


def caller_grants(policy: Policy) -> list[str]:
    """One sentence per thing a caller may do, in review order; a strict task says so."""
    contract = policy.caller
    said = [_value(key, bound) for key, bound in contract.opened().items()]
    said += _parts(policy)
    if contract.forward_user_id:
        said.append(
            "The gateway forwards a pseudonymous caller identifier as metadata.user_id "
            "(never the caller's name)."
        )
    if not contract.is_open:
        said.insert(
            0,
            "Strict: callers bring nothing of their own; the system prompt, tools and output "
            "are the policy's, and anything else a caller sends is refused.",
        )
    if broad_grant(policy):
        said.append(
            "RISK: callers bring their own system prompt and their own tools, and no answer "
            "is checked against a schema: the task can be made to do almost anything, and "
            "only the recorded requests show what it did."
        )
    return said


def _n(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:g}"


def _value(key: str, bound: CallerRange | CallerChoice) -> str:
    if isinstance(bound, CallerChoice):
        return f"Callers may choose {key}: {', '.join(bound.allowed)}."
    low = _n(bound.min) if bound.min is not None else "the provider's minimum"
    high = _n(bound.max) if bound.max is not None else "no limit"
    sentence = f"Callers may choose {key} from {low} to {high}"
    if isinstance(bound, TokenRange) and bound.caps:
        return sentence + f"; a larger value is lowered to {high} (capped), and the answer says so."
    return sentence + "; a larger value is refused." if key == "max_tokens" else sentence + "."


def _parts(policy: Policy) -> list[str]:
    c = policy.caller
    said: list[str] = []
    if c.system is not None and c.system.mode != "policy":
        size = f"up to {c.system.max_bytes:,} bytes" if c.system.max_bytes else "any size"
        if c.system.mode == "append":
            said.append(
                f"Callers may add their own system prompt ({size}) after the policy's, which is "
                "always sent first."
            )
        elif policy.prompt.system is not None:
            said.append(
                f"Callers may replace the system prompt with their own ({size}, with any "
                "system messages between turns); the policy's is sent only when a caller "
                "sends none."
            )
        else:
            said.append(
                f"Callers may send their own system prompt ({size}, with any system messages "
                "between turns)."
            )
    if c.tools is not None:
        t = c.tools
        names = "any name" if t.allow == ("*",) else "named " + ", ".join(t.allow)
        names += f" except {', '.join(t.deny)}" if t.deny else ""
        server = ", ".join(t.server) if t.server else "none"
        choice = (
            "callers may force a tool (tool_choice)"
            if t.choice == "free"
            else "the model chooses which tool to call"
        )
        said.append(
            f"Callers may declare their own tools (at most {t.max_count}, "
            f"{t.max_bytes:,} bytes in all) with {names}; provider-run tools allowed: "
            f"{server}; {choice}. The caller runs its tools; each call and result is recorded."
            if t.max_count is not None and t.max_bytes is not None
            else f"Callers may declare their own tools with {names} (unbounded)."
        )
    if c.output is not None and c.output.json_schema:
        said.append(
            "Callers may ask for answers in their own JSON schema"
            + (f" (up to {c.output.max_bytes:,} bytes)" if c.output.max_bytes else "")
            + "; every answer is checked against it and a mismatch is flagged."
        )
    if c.thinking is not None:
        budget = (
            f", with a budget of at most {c.thinking.max_budget_tokens:,} tokens"
            if c.thinking.max_budget_tokens is not None
            else ""
        )
        said.append(f"Callers may set thinking ({', '.join(c.thinking.allowed)}){budget}.")
    if c.stop_sequences is not None:
        s = c.stop_sequences
        said.append(
            f"Callers may add up to {s.max_count} stop sequences of at most {s.max_length} "
            "characters after the policy's own."
        )
    if c.metadata is not None:
        said.append(f"Callers may send metadata: {', '.join(c.metadata.allowed)}.")
    if c.context_management is not None:
        said.append(
            "Callers may ask the provider to edit the conversation before the model reads it "
            f"({', '.join(c.context_management.allowed)}): the model then reads less than "
            "the recorded request holds."
        )
    if c.betas is not None:
        said.append(
            f"Callers may turn on these beta features (anthropic-beta): "
            f"{', '.join(c.betas.allowed)}."
        )
    return said
