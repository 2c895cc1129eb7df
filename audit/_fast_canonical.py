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

An object or array is first tried by orjson, which writes the same bytes as json for every
string (each code point checked) and sorts keys by code point, about twenty times faster than
the walk json needs (a request carrying 30 KB of caller tools: 20 us against 450). Its bytes
are kept only when they show what the walk would have checked: no float written (a float is
the one JSON value the two encoders write differently, and a digit before ``.`` or ``e`` is
the only way one shows), no byte from U+D800's lead byte up (the key order's limit, above),
and read back equal to the value (orjson writes an ``Enum``, a ``UUID`` and NaN as JSON where
rfc8785 refuses them, and a tuple as an array); integers past the safe range and subclasses
of the JSON types stop orjson itself. Otherwise the walk decides, as before. For bytes of 4 KB
and more, the scan's verdict and the value read back are remembered by the bytes themselves
(a framework's tools are the same bytes on every request); the value is compared every time.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

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
    if type(value) is dict:
        try:
            fast = _members(value, max_depth)
        except RecursionError:  # objects within objects, each with a float: the walk decides
            fast = None
        if fast is not None:
            return fast
    elif type(value) is list:
        fast = _by_orjson(value, max_depth)
        if fast is not None:
            return fast
    try:
        limit = _UNBOUNDED if max_depth is None else max_depth
        return _ENCODE(_plain(value, limit)).encode("utf-8")
    except (_Unsure, UnicodeEncodeError, ValueError, TypeError, RecursionError):
        return None


_UNBOUNDED = 1 << 30

_ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER  # beyond 2**53 - 1 either way: left to the walk (and rfc8785)
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def _refuse(_value: Any) -> Any:
    raise TypeError


# What decides whether orjson's bytes can be kept, each byte mapped by one C translate: a digit
# as "0"; ".", "e" and "E" as "."; a byte from 0xED (U+D800's lead byte) up as "!"; anything
# else as " ". Then "0." is a float or a string quoting one (the parser tells which), "!" a
# character whose key order may differ. (A literal pattern: the regex engine's literal search
# is quicker here than bytes' own.)
_SCAN = bytes(
    48 if 48 <= b <= 57 else 46 if b in (46, 69, 101) else 33 if b >= 0xED else 32
    for b in range(256)
)
_FLOAT_LIKE = re.compile(rb"0\.")


class _FloatSeen(Exception):
    pass


def _float_seen(_text: str) -> Any:
    raise _FloatSeen


def _writes_a_float(data: bytes) -> bool:
    """Whether json's parser meets a float token in ``data`` (orjson's own output: valid)."""
    try:
        json.loads(data, parse_float=_float_seen)
    except _FloatSeen:
        return True
    return False


def _orjson_depth_limit() -> int | None:
    """The deepest nesting orjson writes (it refuses deeper with an error), if it is the one
    this module was written against (254); otherwise None and orjson bounds no depth here."""
    probe: Any = []
    for _ in range(253):
        probe = [probe]
    try:
        orjson.dumps(probe)  # 254 levels
    except orjson.JSONEncodeError:
        return None
    try:
        orjson.dumps([probe])  # 255
    except orjson.JSONEncodeError:
        return 254
    return None


_ORJSON_DEPTH = _orjson_depth_limit()


# How many levels of objects are written member by member: a request body's float sits one or
# two levels down. Each level asks orjson about its whole subtree again, so an unbounded split
# of a deep object (a caller's 60 levels around a float and 1 MB) cost depth x size.
_SPLIT_LEVELS = 3


def _members(
    value: dict[Any, Any], max_depth: int | None, split: int = _SPLIT_LEVELS
) -> bytes | None:
    """An object written member by member (keys sorted as the walk sorts them), each member's
    value by orjson where it can be, member by member again for an object orjson's bytes
    cannot be kept for, and by the walk otherwise: a float among an event's numbers (a
    temperature, a latency), or inside a nested object (a request body's ``temperature``
    beside its tools), sends only the members that hold it to the walk, not the 30 KB of
    caller tools beside it. None where the walk must decide the whole object."""
    room = _UNBOUNDED if max_depth is None else max_depth - 1
    if room < 0:
        return None
    keys = list(value)
    for key in keys:
        if type(key) is not str or not (key.isascii() or max(key) < _HIGH):
            return None
    written = []
    for key in sorted(keys):
        item = value[key]
        fast = None
        if type(item) is dict or type(item) is list:
            # An object with a float member of its own (a planned body's temperature) is
            # never kept whole (orjson writes the float): straight to its members.
            if not (split > 1 and type(item) is dict and _has_float_member(item)):
                fast = _by_orjson(item, None if max_depth is None else room)
            if fast is None and type(item) is dict and split > 1:
                # A float somewhere inside (a planned body's temperature beside 30 KB of
                # caller tools): only the members that hold one go to the walk, level by level.
                fast = _members(item, None if max_depth is None else room, split - 1)
        if fast is None:
            try:
                fast = _ENCODE(_plain(item, room)).encode("utf-8")
            except (_Unsure, UnicodeEncodeError, ValueError, TypeError, RecursionError):
                return None
        written.append(_ENCODE(key).encode("utf-8") + b":" + fast)
    return b"{" + b",".join(written) + b"}"


def _by_orjson(value: dict[str, Any] | list[Any], max_depth: int | None) -> bytes | None:
    """orjson's bytes for ``value`` where they are provably the canonical ones, else None.

    A depth bound is orjson's own nesting limit, with ``value`` wrapped in as many arrays as
    the limit exceeds the bound (so orjson refuses exactly a value deeper than the bound);
    without a known limit, only a value with no more brackets than the bound is answered."""
    wrap = 0
    if max_depth is not None:
        if max_depth < 1:
            return None
        if _ORJSON_DEPTH is not None and max_depth < _ORJSON_DEPTH:
            wrap = _ORJSON_DEPTH - max_depth
    wrapped: Any = value
    for _ in range(wrap):
        wrapped = [wrapped]
    try:
        data = orjson.dumps(wrapped, default=_refuse, option=_ORJSON_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return None
    if wrap:
        data = data[wrap:-wrap]
    elif max_depth is not None and data.count(b"[") + data.count(b"{") > max_depth:
        return None  # no known limit of orjson's to bound the depth by
    high, floats, read = _read_back(data, keys_sorted=True)
    if high or floats or read != value:
        return None
    return data


def _has_float_member(value: dict[Any, Any]) -> bool:
    return any(type(item) is float for item in value.values())


_NOT_READ: Any = object()  # never equal to a value: data that writes a float is not read back


def _read_back(data: bytes, keys_sorted: bool) -> tuple[bool, bool, Any]:
    """What decides whether orjson's ``data`` can be kept: whether it holds a byte from
    U+D800's lead byte up (which matters where ``keys_sorted``), whether it writes a float,
    and (when neither rules it out) the value it reads back as. All three are a function of
    the bytes alone, so for larger bytes seen again (a framework sends the same 30 KB of tools
    on every request) they are remembered by the bytes themselves: the caller still compares
    its own value with the value read back; only the parse and the scan are not repeated."""
    if not _MEMO_MIN_BYTES <= len(data) <= _MEMO_MAX_BYTES:
        scan = data.translate(_SCAN)
        high = b"!" in scan
        floats = _FLOAT_LIKE.search(scan) is not None and _writes_a_float(data)
        ruled_out = floats or (high and keys_sorted)
        return high, floats, _NOT_READ if ruled_out else orjson.loads(data)
    known = _MEMO.get(data)
    if known is not None:
        return known
    scan = data.translate(_SCAN)
    floats = _FLOAT_LIKE.search(scan) is not None and _writes_a_float(data)
    found = (b"!" in scan, floats, _NOT_READ if floats else orjson.loads(data))
    _remember(data, found)
    return found


def _remember(data: bytes, found: tuple[bool, bool, Any]) -> None:
    # Kept only the second time the same bytes are seen (a conversation's messages, new bytes
    # on every turn, never displace the tools), and started again when full: a memo of
    # verdicts, never a record. ``hash(data)`` was computed by the lookup (bytes keep it); it
    # only decides what to keep, never what is returned.
    seen = hash(data)
    if seen not in _SEEN_ONCE:
        if len(_SEEN_ONCE) >= 1024:
            _SEEN_ONCE.clear()
        _SEEN_ONCE.add(seen)
        return
    if len(_MEMO) >= _MEMO_ENTRIES:
        _MEMO.clear()
    _MEMO[data] = found


# Keyed by the full bytes (equal bytes, never a digest of them), at most 16 entries of at most
# 256 KB: below 4 KB the parse costs less than hashing and looking up the key. The values are
# never handed out, only compared with (``!=`` reads both sides and changes neither).
_MEMO_MIN_BYTES = 4 * 1024
_MEMO_MAX_BYTES = 256 * 1024
_MEMO_ENTRIES = 16
_MEMO: dict[bytes, tuple[bool, bool, Any]] = {}
_SEEN_ONCE: set[int] = set()


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


_COMPACT_OPTIONS = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def fast_compact(value: Any) -> bytes | None:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` as UTF-8 (keys in the
    value's own order), by orjson where the two write the same bytes (the checks of
    :func:`_by_orjson` but the key order's, which no sorting here can change); None otherwise."""
    try:
        data = orjson.dumps(value, default=_refuse, option=_COMPACT_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is one
        return None
    _, floats, read = _read_back(data, keys_sorted=False)
    if floats or read != value:
        return None
    return data


def nested_within(value: Any, max_depth: int, max_bytes: int | None = None) -> bool:
    """True when the arrays and objects of ``value`` provably nest at most ``max_depth`` levels
    (an empty one counts as a level), and its compact JSON is at most ``max_bytes`` long:
    orjson's own nesting limit decides in C (:func:`compact_if_shallow`). False when it could
    not be shown (deeper, longer, a limit not the one probed, a value orjson does not write):
    a walk decides."""
    written = compact_if_shallow(value, max_depth)
    return written is not None and (max_bytes is None or len(written) <= max_bytes)


def compact_if_shallow(value: Any, max_depth: int) -> bytes | None:
    """orjson's compact bytes of ``value`` (keys in its own order) when its arrays and objects
    provably nest at most ``max_depth`` levels, shown by orjson's nesting limit with ``value``
    wrapped in as many arrays as that limit exceeds the bound; None when not shown (deeper, a
    limit not the one probed, a value orjson does not write)."""
    if _ORJSON_DEPTH is None or not 1 <= max_depth < _ORJSON_DEPTH:
        return None
    wrap = _ORJSON_DEPTH - max_depth
    wrapped: Any = value
    for _ in range(wrap):
        wrapped = [wrapped]
    try:
        written = orjson.dumps(wrapped, default=_refuse)
    except TypeError:  # orjson.JSONEncodeError is one
        return None
    return written[wrap:-wrap]
