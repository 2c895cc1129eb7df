"""RFC 8785 bytes through the standard library's C JSON encoder, for the values where its
output is provably the same as ``rfc8785.dumps``; None for any other value.

    fast_canonical({"b": 1, "a": 0.0})    # b'{"a":0,"b":1}', or None: use rfc8785

``rfc8785`` is pure Python and dominated a replay's time (one canonical form per re-planned
request hash and per appended event). ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` writes the same bytes when:

- strings: both escape exactly ``"``, ``\\``, ``\\b \\f \\n \\r \\t`` and the other controls below
  U+0020 as ``\\u00xx`` (lowercase hex), nothing else; a lone surrogate fails the UTF-8 encode
  here and is left to rfc8785 (which refuses it);
- object keys: RFC 8785 sorts by UTF-16 code units, Python by code points; the two orders
  differ only between a character at or above U+D800 and one beyond U+FFFF, so an object with
  a key holding any character from U+D800 up is left to rfc8785;
- integers: within the safe range (rfc8785 refuses the others); ``bool`` before ``int``;
- floats: an integral float within the safe range is written as that integer (ECMAScript
  drops ``.0``); a finite non-integral float with 1e-4 <= |x| < 1e16 is written as Python's
  shortest round-trip repr, which in that range is the ECMAScript form too; any other float
  is left to rfc8785.

Anything else (subclasses of the JSON types, other types) is left to rfc8785 as well, so its
errors and its treatment stay the reference. tests/audit/test_fast_canonical.py compares both
on generated values.
"""

from __future__ import annotations

import json
from typing import Any

_INT_MAX = 2**53 - 1
_HIGH = "\ud800"  # the first code point at which UTF-16 and code-point key orders can differ
_ENCODE = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
).encode


class _Unsure(Exception):
    """The value may have another RFC 8785 form than the one json writes."""


def fast_canonical(value: Any, max_depth: int | None = None) -> bytes | None:
    """``max_depth``: also None when ``value`` nests arrays and objects deeper than that
    (an empty one counts as a level), so a caller that must bound the depth needs no walk
    of its own."""
    try:
        limit = _UNBOUNDED if max_depth is None else max_depth
        return _ENCODE(_plain(value, limit)).encode("utf-8")
    except (_Unsure, UnicodeEncodeError, ValueError, TypeError, RecursionError):
        return None


_UNBOUNDED = 1 << 30
_LEAVES = (str, bool, type(None))


def _plain(value: Any, room: int) -> Any:
    """``value`` with integral floats as ints; ``_Unsure`` where json could differ, or where
    a container sits deeper than ``room`` more levels allow. Strings, flags and nulls inside
    a container are taken as they are, without a call each (most of a request is strings)."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is int:
        if -_INT_MAX <= value <= _INT_MAX:
            return value
        raise _Unsure
    if kind is dict:
        if room < 1:
            raise _Unsure
        inner = room - 1
        out = {}
        for key, item in value.items():
            # isascii is a flag read for most keys; max() scans only the others.
            if type(key) is not str or not (key.isascii() or max(key) < _HIGH):
                raise _Unsure
            out[key] = item if type(item) in _LEAVES else _plain(item, inner)
        return out
    if kind is list or kind is tuple:
        if room < 1:
            raise _Unsure
        inner = room - 1
        return [item if type(item) in _LEAVES else _plain(item, inner) for item in value]
    if kind is float:
        # NaN and the infinities are not integral and fail the range: left to rfc8785.
        if value.is_integer():
            if -_INT_MAX <= value <= _INT_MAX:
                return int(value)
            raise _Unsure
        if 1e-4 <= abs(value) < 1e16:
            return value
        raise _Unsure
    raise _Unsure
