"""The caller parts a request body holds exactly as sent, and reading them back from it.

A caller's tools, own system prompt or output schema go on the wire as the caller sent them,
and the REQUEST's ``request_body`` payload records those bytes. The REQUEST's data names
where in that body each such part is (``requested_in_body``: override key -> a path of
member names and list indexes), and its ``requested`` names it by size, instead of a second
copy in the sealed ``overrides`` payload, which keeps the other overrides as sent (an
appended list of system blocks, stop sequences, ...):

    plan.in_body                                         # {"tools": ("tools",)}
    in_body_overrides(requested, request.data, body)     # every override, as sent

A REQUEST without ``requested_in_body`` (every one recorded before it existed) holds every
override in its ``overrides`` payload or its data, and reads back as it always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Path = tuple[str | int, ...]

# Where each part that may be large may sit in the planned body. A part is recorded by
# reference only where the body holds the plan's own copy of it at one of these paths (the
# very object, so the value is the one the caller sent: gateway.policy._owned_parts.owned), so
# a part the plan changed or combined is never taken for one sent as is.
PATHS: dict[str, tuple[Path, ...]] = {
    "tools": (("tools",),),
    # The caller's own prompt, or its text after the policy's block ([caller] system "append").
    "system": (("system",), ("system", 1, "text")),
    "output_format": (("output_config", "format"),),
}

IN_BODY = "requested_in_body"  # the REQUEST data's field (docs/audit.md)

# The overrides whose value a caller writes freely: content, never in an event's data nor in
# an error message (which a REJECTED or REPLAY event records); shown by size instead.
CONTENT_OVERRIDES = frozenset(
    {"system", "tools", "tool_choice", "output_format", "stop_sequences", "metadata"}
)


def shown_override(key: str, value: object) -> str:
    """An override's value as an error message may quote it: a setting as given, content
    by its kind alone."""
    return f"<{type(value).__name__}>" if key in CONTENT_OVERRIDES else repr(value)


def in_body(body: Mapping[str, Any], parts: Mapping[str, object]) -> dict[str, Path]:
    """The paths in ``body`` that hold a part of ``parts`` (override key -> the plan's own
    copy of what the caller sent) as that very object."""
    found: dict[str, Path] = {}
    for key, paths in PATHS.items():
        part = parts.get(key)
        if part is None:
            continue
        for path in paths:
            if _at(body, path) is part:
                found[key] = path
                break
    return found


def in_body_overrides(
    requested: Mapping[str, Any], data: Mapping[str, Any], body: Any
) -> dict[str, Any] | None:
    """``requested`` (the overrides a REQUEST holds as sent: its ``overrides`` payload, or its
    data) with each part its data names in the request body (``requested_in_body``) read
    from ``body`` (the recorded wire body, parsed); None when the body does not hold one
    there (an unreadable body)."""
    overrides = dict(requested)
    refs = data.get(IN_BODY)
    if not isinstance(refs, Mapping):
        return overrides
    for key, path in refs.items():
        if not isinstance(path, list):
            return None
        value = _at(body, tuple(path))
        if value is None:
            return None
        overrides[key] = value
    return overrides


def _at(value: Any, path: Path) -> Any:
    """The value at ``path`` (member names and list indexes), or None where there is none."""
    for step in path:
        if isinstance(step, str) and isinstance(value, Mapping):
            value = value.get(step)
        elif type(step) is int and isinstance(value, list) and 0 <= step < len(value):
            value = value[step]
        else:
            return None
    return value
