"""A request body read whole and parsed as JSON, within bounds, without stalling other callers.

    body = await read_json(request, limit=settings.server_max_body_bytes)

At most ``limit`` bytes (413 beyond, before the rest is read), UTF-8, at most MAX_JSON_DEPTH
levels deep, every key once per object (a second ``model`` would otherwise win silently,
while a proxy or a log in front may have read the first), and no lone surrogate escape
(``"\\ud800"`` is valid JSON but no text: it cannot be recorded, hashed or even answered in
UTF-8). Anything else is a typed 400 naming what is wrong.

A body up to INLINE_BYTES is parsed by orjson (a tenth of json's time for 30 KB of tools) and
checked by one pass of json's C scanner with C callables as hooks (every object's keys, every
integer's digits), with no Python code per object: orjson's value is kept when no object names a
key twice and no integer is long enough for orjson to read it as a float. A compact body (what
the SDKs send) that orjson writes back byte for byte needs no scan: a repeated key would have
been dropped and written shorter, a number read as anything else written otherwise. Any other
body (and any body orjson refuses) is parsed by json with the duplicate-key hook below, which
decides and words the error as it always did; its depth is shown in C where it can be
(:func:`audit.canonical.shallow_enough`). A larger body keeps json's hook and the depth walk:
their Python code is where the worker thread lets the event loop run (below).

A body larger than INLINE_BYTES is parsed in a worker thread. Parsing holds the
interpreter lock, but the duplicate-key check runs Python code at every object, where the
lock passes to the event loop at its usual interval (5 ms): a caller sending megabytes of
JSON no longer stops every other caller's requests for the whole parse. The depth is checked
after the parse, iteratively; deeper nesting than the parser's own recursion guard is
refused by that guard.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request

from audit.canonical import shallow_compact, shallow_enough
from gateway._inputs import safe_label
from gateway.server._errors import ApiError

__all__ = ["MAX_JSON_DEPTH", "BodyError", "parse_json_body", "read_json"]

MAX_JSON_DEPTH = 64  # a Messages request is a few levels deep; this leaves room for tools
INLINE_BYTES = 64 * 1024  # smaller bodies parse faster than a hand-off to a thread


class BodyError(ValueError):
    """A body that is not JSON the server accepts; the message says why."""


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    # Only containers are pushed, tested inline: a request's many strings cost no call each.
    pending: list[tuple[Any, int]] = [(value, 1)] if type(value) in _CONTAINERS else []
    while pending:
        current, depth = pending.pop()
        if depth > limit:
            return True
        inner = depth + 1
        items = current.values() if type(current) is dict else current
        pending.extend([(item, inner) for item in items if type(item) in _CONTAINERS])
    return False


_CONTAINERS = (dict, list)  # what json.loads (with the hook below) makes of objects and arrays


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_UNSURE: Any = object()
_LONGEST_SAFE_INTEGER = 18  # characters, sign included: orjson reads longer ones past 2**63


def _plain_body(text: str, data: bytes, max_depth: int) -> tuple[Any, bool]:
    """orjson's value of ``text`` when it is json's and no object repeats a key (_UNSURE
    otherwise: json with the duplicate-key hook decides), and whether it was shown to nest at
    most ``max_depth`` levels (the serialisation that compares it with ``data`` shows that too,
    in C)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN, 1e400, a lone surrogate, too deep, not JSON
        return _UNSURE, False
    written = shallow_compact(value, max_depth)
    shallow = written is not None
    if written is None:
        try:
            written = orjson.dumps(value)
        except orjson.JSONEncodeError:  # nested deeper than orjson writes: the scan decides
            written = None
    if written == data:
        # Written back byte for byte (a compact body, as the SDKs send): no object lost a
        # repeated key (that would write fewer bytes) and every number reads as it is
        # written, so json's scan below has nothing left to find.
        return value, shallow
    objects: list[list[tuple[str, Any]]] = []
    integers: list[str] = []
    try:
        # Hooks in C (list.append): the objects become None, the value is orjson's.
        json.loads(text, object_pairs_hook=objects.append, parse_int=integers.append)
    except (ValueError, RecursionError):
        return _UNSURE, False
    if any(len(digits) > _LONGEST_SAFE_INTEGER for digits in integers):
        return _UNSURE, False
    if sum(map(len, objects)) != sum(map(len, map(dict, objects))):
        return _UNSURE, False  # a key named twice in one object
    return value, shallow


def parse_json_body(data: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``data`` as JSON within the bounds above; :class:`BodyError` otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"the request body is not UTF-8 (at byte {exc.start}).") from None
    too_deep = BodyError(f"the request body nests more than {max_depth} levels deep.")
    inline = len(data) <= INLINE_BYTES
    value, shallow = _plain_body(text, data, max_depth) if inline else (_UNSURE, False)
    try:
        if value is _UNSURE:
            value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise BodyError(
            f"the request body names {safe_label(exc.key)[:80]!r} more than once in one "
            "object; send each key once."
        ) from None
    except RecursionError:  # the parser's own guard, far deeper than max_depth
        raise too_deep from None
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise BodyError(f"the request body is not JSON ({safe_label(str(exc))[:120]}).") from None
    if (
        not shallow
        and text.count("[") + text.count("{") > max_depth
        and not (inline and shallow_enough(value, max_depth))
        and _deeper_than(value, max_depth)
    ):
        raise too_deep
    # Only an escape makes a surrogate: text without one cannot hold any.
    if ("\\ud" in text or "\\uD" in text) and _has_lone_surrogate(value):
        raise BodyError(
            "the request body holds a lone surrogate escape (such as \\ud800), which is "
            "not text; send the characters as UTF-8 or as escaped pairs."
        )
    return value


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, at most ``limit`` bytes, within the bounds of :func:`parse_json_body`."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:  # gone, or cut off at the body time-out (answered 408 there)
        raise ApiError(
            400, "invalid_request_error", "the connection closed before the body was whole."
        ) from None
    data = b"".join(chunks)
    try:
        if len(data) <= INLINE_BYTES:
            return parse_json_body(data)
        return await asyncio.to_thread(parse_json_body, data)
    except BodyError as exc:
        raise ApiError(400, "invalid_request_error", str(exc)) from None


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "request_too_large", f"the request body is larger than {limit:,} bytes.")
