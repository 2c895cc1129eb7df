"""Coverage in the record: whether a recorded policy's caller contract was strict or opened,
and which parts of a request its caller brought. Both read recorded data (a policy's
content, the names of a REQUEST's overrides), so they answer for logs of every age: a log
from before caller contracts reads as strict, with nothing caller-supplied.

    contract_of(store.policy_content(fingerprint))       # "strict" | "opened" | None
    caller_parts(requested_keys(request.data))          # ("system prompt", "tools")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from gateway.policy._schema import CALLER_PARTS as OPENING_KEYS

Contract = Literal["strict", "opened"]

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
    for key in OPENING_KEYS:
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
    """The caller-supplied parts a request carried, by an auditor's name, in a fixed order:
    ``requested`` is its overrides, or their names (``requested_keys`` of its event data)."""
    if not isinstance(requested, Mapping | tuple | list | frozenset | set):
        return ()
    return tuple(name for key, name in PART_NAMES.items() if key in requested)
