"""Coverage in the record: whether a recorded policy's caller contract was strict or opened,
and which parts of a request its caller brought. Both read recorded data (a policy's
content, a REQUEST's ``requested`` overrides), so they answer for logs of every age: a log
from before caller contracts reads as strict, with nothing caller-supplied.

    contract_of(store.policy_content(fingerprint))       # "strict" | "opened" | None
    caller_parts(request.data.get("requested"))         # ("system prompt", "tools")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Contract = Literal["strict", "opened"]

# The [caller] keys that open a part of the request the caller brings, in review order.
CALLER_PARTS = (
    "system",
    "tools",
    "output",
    "thinking",
    "stop_sequences",
    "metadata",
    "context_management",
    "betas",
)


# A request's overrides that are a part the caller brought, and what an auditor calls them.
PART_NAMES = {
    "system": "system prompt",
    "tools": "tools",
    "tool_choice": "tool choice",
    "output_format": "schema",
    "thinking": "thinking",
    "stop_sequences": "stop sequences",
    "metadata": "metadata",
    "context_management": "context management",
    "betas": "betas",
}


def opened_keys(content: Mapping[str, object] | None) -> tuple[str, ...]:
    """The ``[caller]`` keys of a policy's content that open a caller-supplied part (the
    recorded form of :meth:`Caller.parts`, read without rebuilding the policy, so content
    of every age answers)."""
    caller = content.get("caller") if content is not None else None
    if not isinstance(caller, Mapping):
        return ()
    opened = []
    for key in CALLER_PARTS:
        value = caller.get(key)
        if value is None:
            continue
        if key == "system" and isinstance(value, Mapping) and value.get("mode") == "policy":
            continue  # the policy's own prompt only: what a strict contract does
        opened.append(key)
    return tuple(opened)


def contract_of(content: Mapping[str, object] | None) -> Contract | None:
    """ "opened" when the policy lets a caller bring a part of the request, else "strict";
    None when the content is not known."""
    if content is None:
        return None
    return "opened" if opened_keys(content) else "strict"


def caller_parts(requested: object) -> tuple[str, ...]:
    """The caller-supplied parts a request carried, by an auditor's name, in a fixed order."""
    if not isinstance(requested, Mapping):
        return ()
    return tuple(name for key, name in PART_NAMES.items() if key in requested)
