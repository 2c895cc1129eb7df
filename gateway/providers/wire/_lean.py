"""The lean upstream leg: the gateway writes a Messages body's bytes once and the SDK's HTTP
client sends exactly those, where they are provably the bytes ``messages.create()`` would write.

    lean = LeanBody(capture)                       # once per provider (checks the SDK first)
    wire = lean.wire_bytes(body)                   # None: send through create() as before
    with sending(lean_request(client, "/v1/messages", wire, headers, timeout), on_wire) as raw:
        ...                                        # raw.http_response, unread, as create()'s

``create()`` copies the whole body (about 380 us for 30 KB of caller tools) and encodes it
with the standard library's C encoder (``ensure_ascii=False``, compact separators, no NaN),
typed fields first in its own order, then ``extra_body``'s. :class:`LeanBody` writes the same
bytes without the copy: the same field order (learnt from the SDK itself, by capturing a probe
that sets every typed field), the encoder's own settings, orjson where it provably writes the
same bytes (:func:`audit.canonical.compact_bytes`). It is used only when the capture of the
SDK's own serialisation agrees with it on every probe body, as the wire capture's fast path is
trusted; a body holding anything json does not write natively (a date, a model object, a file
the SDK would encode) gets ``None``, and goes through ``create()``. The request then goes
through the SDK client's own ``post`` (its headers, URL, timeout, retry-free send, error
mapping and the request hooks that strip headers and announce the bytes), as a raw streamed
response: the same ``APIResponse`` whose ``http_response`` the provider reads, so every
answer and error is parsed and classified where it always was. The recorder is told these
bytes by the same request hook, so the record still holds what the upstream received.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, cast

import anthropic
import httpx2
from anthropic._constants import RAW_RESPONSE_HEADER
from anthropic._response import (
    APIResponse,
    AsyncAPIResponse,
    AsyncResponseContextManager,
    ResponseContextManager,
)

from audit.canonical import compact_bytes
from gateway.providers.base import BETAS_FIELD
from gateway.providers.wire._body import TYPED_BODY_FIELDS
from gateway.providers.wire._capture import PROBES, WireCapture

__all__ = ["LeanBody", "alean_request", "lean_request", "post_options"]

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

# Bodies on which the lean bytes must equal the SDK's before they are used: the capture's own
# probes, and a framework-shaped one (caller system blocks, tools, tool choice, thinking,
# metadata, extra fields in a non-sorted order, text the encoder escapes).
_LEAN_PROBES: tuple[dict[str, Any], ...] = (
    *PROBES,
    {
        "top_p": 0.9,
        "model": "probe",
        "tools": [{"name": "t", "input_schema": {"type": "object", "properties": {}}}],
        "messages": [{"role": "user", "content": 'q "\\\n\t\u2028 \U0001f600'}],
        "tool_choice": {"type": "auto"},
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "metadata": {"user_id": "u"},
        "temperature": 1,
        "stream": False,
    },
)


class LeanBody:
    """The SDK's bytes of a body, written by the gateway (see the module). ``on`` says whether
    the SDK agreed on every probe; when it did not, :meth:`wire_bytes` always gives None."""

    def __init__(self, capture: WireCapture) -> None:
        self._order = _typed_order(capture)
        self.on = self._order is not None and all(
            self.wire_bytes(probe) == capture.wire_bytes(probe) for probe in _LEAN_PROBES
        )
        if not self.on:
            self._order = None

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes | None:
        """The bytes ``create()`` would put on the wire for ``body``, or None (send through it)."""
        order = self._order
        if order is None:
            return None
        ordered = {key: body[key] for key in order if key in body}
        for key, value in body.items():
            if key not in TYPED_BODY_FIELDS and key != BETAS_FIELD:
                ordered[key] = value
        try:
            return _compact(ordered)
        except (TypeError, ValueError, UnicodeEncodeError):
            return None  # not plain JSON (or NaN, or a lone surrogate): create() decides


def _compact(body: dict[str, Any]) -> bytes:
    """``body`` as the encoder writes it, member by member: each object or array by orjson
    where it writes the same bytes, the rest (a float, a scalar) by the encoder itself, so a
    temperature does not send 30 KB of caller tools to the slower encoder."""
    written = []
    for key, value in body.items():
        member = None
        if type(value) is dict or type(value) is list:
            member = compact_bytes(value)  # json's own bytes, by orjson where provably so
            if b"NaN" in member or b"Infinity" in member:
                member = None  # json writes NaN where the SDK's encoder refuses it: decide below
        if member is None:
            member = _ENCODE(value).encode("utf-8")
        written.append(_ENCODE(key).encode("utf-8") + b":" + member)
    return b"{" + b",".join(written) + b"}"


def _typed_order(capture: WireCapture) -> tuple[str, ...] | None:
    """The order ``create()`` writes its typed fields in, from the SDK's own bytes for a body
    that sets every one of them; None when those bytes do not name exactly those fields."""
    probe = dict.fromkeys(sorted(TYPED_BODY_FIELDS), 1)
    try:
        pairs = json.loads(capture.wire_bytes(probe), object_pairs_hook=list)
    except Exception:  # noqa: BLE001 - any failure: no lean leg, create() as before
        return None
    keys = tuple(key for key, _ in pairs)
    if sorted(keys) != sorted(TYPED_BODY_FIELDS):
        return None
    return keys


def post_options(headers: Mapping[str, Any], timeout: httpx2.Timeout) -> Any:
    """The SDK request options of a lean post: the call's headers, its timeout, unread."""
    # RAW_RESPONSE_HEADER "stream": the SDK hands over the response unread, as
    # with_streaming_response does, so the provider reads (and judges) the body itself.
    return {"headers": {**headers, RAW_RESPONSE_HEADER: "stream"}, "timeout": timeout}


def lean_request(
    client: anthropic.Anthropic,
    path: str,
    wire: bytes,
    headers: Mapping[str, Any],
    timeout: httpx2.Timeout,
) -> ResponseContextManager[APIResponse[object]]:
    """``wire`` posted to ``path`` by the SDK client, as ``with_streaming_response.create()``
    would post its own bytes: a context manager giving the unread raw response."""
    # cast_to object: an APIResponse around the unread response (httpx's Response would be
    # handed back bare); nothing is parsed here, the provider reads the body itself.
    make = partial(
        client.post, path, cast_to=object, content=wire, options=post_options(headers, timeout)
    )
    return ResponseContextManager(cast("Callable[[], APIResponse[object]]", make))


def alean_request(
    client: anthropic.AsyncAnthropic,
    path: str,
    wire: bytes,
    headers: Mapping[str, Any],
    timeout: httpx2.Timeout,
) -> AsyncResponseContextManager[AsyncAPIResponse[object]]:
    """:func:`lean_request` for the async client."""
    made = client.post(path, cast_to=object, content=wire, options=post_options(headers, timeout))
    return AsyncResponseContextManager(cast("Awaitable[AsyncAPIResponse[object]]", made))
