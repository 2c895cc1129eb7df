"""Rules about the tools a policy declares: the choice, strict schemas, provider-run tools."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error
from gateway.policy.rules._subject import Rule, Subject

CHOICE_KEYWORDS = ("auto", "any", "none")


def is_client_tool(tool: dict[str, object]) -> bool:
    """A tool the caller runs (``custom``); every other type is defined by the provider."""
    return tool.get("type", "custom") == "custom"


def _names(s: Subject) -> list[str]:
    return [str(t["name"]) for t in s.policy.tools.definitions or ()]


def tool_choice_unknown(s: Subject) -> Iterator[Finding]:
    choice, declared = s.policy.tools.chosen, s.policy.tools.definitions is not None
    if choice == "auto" or (declared and choice in (*CHOICE_KEYWORDS, *_names(s))):
        return
    if not declared:
        message = f"Tool choice {choice!r} is set, but the policy declares no tools."
    else:
        names = ", ".join(repr(n) for n in _names(s))
        message = (
            f"Tool choice {choice!r} is neither 'auto', 'any' nor 'none', nor a declared tool "
            f"({names})."
        )
    yield error(
        "tool-choice-unknown",
        s.file,
        "tools.choice",
        message,
        "Set choice to 'auto', 'any', 'none' or the name of one tool in the tools file "
        "([tools] file).",
    )


def tool_choice_forced_with_thinking(s: Subject) -> Iterator[Finding]:
    if s.policy.tools.definitions is None or s.policy.tools.chosen in ("auto", "none"):
        return
    thinking = s.policy.generation.thinking
    if thinking is not None and thinking.type != "disabled":
        reason = f"with thinking type {thinking.type!r}"
    elif s.model is not None and not s.model.forced_tool_choice:
        reason = f"on {s.model_id!r}, which always reasons before it acts"
    else:
        return
    yield error(
        "tool-choice-forced-with-thinking",
        s.file,
        "tools.choice",
        f"Tool choice {s.policy.tools.chosen!r} forces a tool call, which the provider refuses "
        f"{reason}: every request of this task would fail.",
        "Use choice = 'auto' (say in the system prompt which tool to use), or turn thinking "
        "off on a model that allows it.",
    )


def tool_strict_unsupported(s: Subject) -> Iterator[Finding]:
    if s.model is None or s.model.strict_tools:
        return
    tools = s.policy.tools.definitions or ()
    strict = [str(t["name"]) for t in tools if t.get("strict") is True]
    if strict:
        yield error(
            "tool-strict-unsupported",
            s.file,
            "tools.file",
            f"The model {s.model_id!r} cannot guarantee tool input matches its schema, but "
            f"tool(s) {', '.join(map(repr, strict))} are declared strict.",
            "Pin a model with structured outputs ('gateway models list'), or remove strict.",
        )


def tool_server_not_allowed(s: Subject) -> Iterator[Finding]:
    for tool in s.policy.tools.definitions or ():
        kind = str(tool.get("type", "custom"))
        if is_client_tool(tool) or kind in s.policy.tools.server:
            continue
        yield error(
            "tool-server-not-allowed",
            s.file,
            "tools.server",
            f"The tool {tool.get('name')!r} is the provider's own tool {kind!r}: it runs at "
            "the provider and reaches the outside world (search, fetch, code, MCP), so its "
            "results cannot be replayed and may leave the bank's control.",
            f'Remove it, or allow exactly this version with server = ["{kind}"] in [tools] '
            "after review.",
        )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    tool_choice_unknown,
    tool_choice_forced_with_thinking,
    tool_strict_unsupported,
    tool_server_not_allowed,
)
