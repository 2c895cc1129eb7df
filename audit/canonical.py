"""Canonical bytes (RFC 8785, JCS) and tagged digests.

    >>> canonical_bytes({"b": 1, "a": 0.0})
    b'{"a":0,"b":1}'
    >>> digest(b"x")[:7]
    'sha256:'

Everything hashed in the audit log goes through here, so the same logical record hashes the
same on every platform and Python version. ``rfc8785`` rejects NaN, infinities and integers
beyond 2**53, which is what we want: such values have no single canonical form.
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring
from typing import Any

import rfc8785

from audit._fast_canonical import (
    compact_if_shallow,
    fast_canonical,
    fast_compact,
    nested_within,
)

DIGEST_PREFIX = "sha256:"


class CanonicalizationError(ValueError):
    """A value has no RFC 8785 form (NaN, infinity, an integer beyond 2**53, a non-JSON type)."""


def canonical_bytes(value: Any) -> bytes:
    # A plain string (most members of an event body) is what fast_canonical would write
    # anyway, json's escaper with ensure_ascii=False: called directly, without the walk. A
    # lone surrogate fails the encode and goes the long way (rfc8785 refuses it).
    if type(value) is str:
        try:
            return encode_basestring(value).encode("utf-8")
        except UnicodeEncodeError:
            pass
    elif value is None:
        return b"null"
    fast = fast_canonical(value)  # the same bytes, from the C encoder, where provably so
    if fast is not None:
        return fast
    try:
        return bytes(rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalizationError(f"value cannot be canonicalised as JSON: {exc}") from exc


def compact_bytes(value: Any) -> bytes:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()``, the same
    bytes (and errors), several times faster for the values a request carries."""
    fast = fast_compact(value)
    if fast is not None:
        return fast
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def shallow_enough(value: Any, max_depth: int, max_bytes: int | None = None) -> bool:
    """True when ``value`` (JSON types) provably nests at most ``max_depth`` levels (an empty
    array or object counts as one) and its compact JSON is at most ``max_bytes`` long, shown in
    C without a walk; False when not shown (deeper, longer, or not decided): the caller's
    walk decides."""
    return nested_within(value, max_depth, max_bytes)


def shallow_compact(value: Any, max_depth: int) -> bytes | None:
    """orjson's compact JSON of ``value`` (keys in its own order, floats in orjson's spelling)
    when it provably nests at most ``max_depth`` levels, shown in C: one serialisation both
    bounds the depth and, compared with the bytes ``value`` was parsed from, shows that a
    parse kept every byte. None when not shown: the caller's walk decides."""
    return compact_if_shallow(value, max_depth)


def digest(data: bytes) -> str:
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def canonical_digest(value: Any) -> str:
    return digest(canonical_bytes(value))
