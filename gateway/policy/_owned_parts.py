"""The plan's own copy of a caller's parts, and the size of a part as compact JSON.

    parts, size = owned({"system": "...", "tools": [...]})  # a copy, equal in value and type
    bytes_over(parts["tools"], 262_144)                     # None: within the bound

The copy is one JSON round trip (far cheaper than a deep copy of a coding agent's tools, and
what the wire takes anyway); the parts' checks, the wire body and the record all read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from audit.canonical import compact_bytes
from gateway.errors import InputError


def owned(brought: Mapping[str, object]) -> tuple[dict[str, Any], int]:
    """The plan's own copy of the parts and its size in UTF-8 bytes of compact JSON."""
    if not brought:
        return {}, 0
    # orjson both ways (a tenth of json's time for 30 KB of tools), kept when the copy reads
    # back equal: NaN and the infinities (written as null), integers past 64 bits and types
    # JSON has no form for go to json, which decides as it always did.
    try:
        data = orjson.dumps(brought)
        copy = orjson.loads(data)
    except orjson.JSONEncodeError:
        copy = None
    if type(copy) is dict and copy == brought:
        return copy, len(data)
    return _owned_by_json(brought)


def _owned_by_json(brought: Mapping[str, object]) -> tuple[dict[str, Any], int]:
    try:
        data = json.dumps(brought, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        encoded = data.encode()
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        raise InputError(
            "the request's parts are not JSON in valid Unicode (an unpaired surrogate, NaN, "
            "Infinity or a value JSON cannot hold).",
            hint="Send the system prompt, tools and schema as plain JSON text.",
        ) from None
    # orjson reads json's own output back as json would (floats round-trip exactly), about
    # twice as fast, but an integer of 64 bits or more as a float: text with a run of 19
    # digits (anywhere, strings included) is read by json.
    copy: dict[str, Any]
    try:
        long_number = _LONG_RUN in encoded.translate(_DIGITS)
        copy = json.loads(encoded) if long_number else orjson.loads(encoded)
    except orjson.JSONDecodeError:  # past orjson's own nesting limit: json decides
        copy = json.loads(encoded)
    return copy, len(encoded)


# Every digit as "0", every other byte as " ": a run of 19 digits is then a plain substring
# search (a regular expression would step through the text in Python's engine, slower than
# the parse it guards).
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"0" * 19


def bytes_over(value: object, most: int | None) -> int | None:
    """The UTF-8 bytes of ``value`` as compact JSON when more than ``most``; None when within.

    ``value`` is the plan's own copy of a part (plain JSON, :func:`owned`), which orjson writes
    byte for byte as json does but for a float's spelling, at most one byte shorter ("1e-9" for
    "1e-09"), and a float takes at least three bytes ("0.0"): json's length is at most 4/3 of
    orjson's. So orjson's bytes settle a size well within the bound (a framework's tools, far
    below it), and only one near it is measured exactly."""
    if most is None:
        return None
    try:
        quick = len(orjson.dumps(value))
    except orjson.JSONEncodeError:  # not plain JSON to orjson: measured exactly
        quick = None
    if quick is not None and 4 * quick <= 3 * most:
        return None
    size = len(compact_bytes(value))
    return size if size > most else None
