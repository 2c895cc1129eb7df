"""The caller parts a request body holds exactly as sent, and a REQUEST's overrides read back.

A caller's tools, own system prompt or output schema go on the wire as the caller sent them,
and the REQUEST's ``request_body`` payload records those bytes. The REQUEST's data names
where in that body each such part is (``requested_in_body``: override key -> a path of
member names and list indexes) instead of holding a second copy in ``requested``, which
keeps the overrides the body does not hold as sent (``max_tokens`` before a cap, ``betas``,
an appended list of system blocks, ...):

    plan.in_body                                     # {"tools": ("tools",)}
    recorded_overrides(request.data, body)           # every override, as the caller sent it
    requested_keys(request.data)                     # ("max_tokens", "tools")

A REQUEST without ``requested_in_body`` (every one recorded before it existed) holds every
override in ``requested``, and reads back as it always did.
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


def recorded_overrides(data: Mapping[str, Any], body: Any) -> dict[str, Any] | None:
    """The overrides a REQUEST's caller sent (its data and its recorded wire body, parsed),
    or None when the body does not hold a part the data names in it (an unreadable body)."""
    requested = data.get("requested")
    overrides = dict(requested) if isinstance(requested, Mapping) else {}
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


def requested_keys(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the overrides a REQUEST (or REJECTED) event recorded, in order: those held
    in ``requested``, then those held in the body. No body needed."""
    keys: list[str] = []
    for field in ("requested", IN_BODY):
        value = data.get(field)
        if isinstance(value, Mapping):
            keys.extend(k for k in value if isinstance(k, str) and k not in keys)
    return tuple(keys)


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
