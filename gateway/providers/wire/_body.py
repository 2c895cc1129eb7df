"""A Messages body between the gateway and the SDK: the call's arguments that put exactly the
planned body on the wire, and the answer's body read, parsed or assembled under our control.

    kwargs = split_body({"model": "m", "max_tokens": 5, "messages": [...], "temperature": 0})
    # -> typed create() arguments, plus extra_body={"temperature": 0}
    content = read_body(http)              # TruncatedResponse when a 2xx body breaks off
    message = parse_message(http, content)  # MalformedResponse when it is not a message

The same for every transport: each SDK client (first-party, Bedrock, Vertex) takes the same
``messages.create`` arguments and hands back an httpx response.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, cast

import anthropic
import httpx2
from anthropic.lib.streaming import MessageStream
from anthropic.resources.messages import Messages
from anthropic.types import RawMessageStreamEvent

from gateway.providers.base import BETAS_FIELD
from gateway.providers.wire._transport import cause_name

__all__ = [
    "COUNT_BODY_FIELDS",
    "TYPED_BODY_FIELDS",
    "VERSION_FIELD",
    "MalformedResponse",
    "TruncatedResponse",
    "aiter_body",
    "aread_body",
    "assemble_stream",
    "beta_headers",
    "count_body",
    "iter_body",
    "message_bytes",
    "parse_message",
    "read_body",
    "split_body",
    "stream_error",
]


# create() arguments that become body fields. Derived from the installed SDK so a new typed field
# is picked up; header-valued arguments and the SDK's own options are not body fields.
_NOT_BODY = frozenset(
    {
        "self",
        "extra_headers",
        "extra_query",
        "extra_body",
        "timeout",
        "user_profile_id",
        "workspace_id",
    }
)
TYPED_BODY_FIELDS = frozenset(inspect.signature(Messages.create).parameters) - _NOT_BODY
# What the counting endpoint reads (messages.count_tokens): everything that makes up the input.
# Output controls (max_tokens, stop_sequences, sampling) and routing (metadata, inference_geo,
# service_tier) do not change the count, and the endpoint refuses them.
COUNT_BODY_FIELDS = frozenset(inspect.signature(Messages.count_tokens).parameters) - _NOT_BODY


class MalformedResponse(Exception):
    """HTTP 200 whose body is not a Messages API message; raised by the provider."""

    error_type = "malformed_response"

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        super().__init__("the upstream answered 200 with a body that is not a message")


class TruncatedResponse(Exception):
    """A 2xx whose body broke off while the provider read it (the upstream did the work)."""

    error_type = "truncated_response"

    def __init__(self, response: httpx2.Response, cause: Exception) -> None:
        self.response = response
        self.cause = cause_name(cause)
        super().__init__(f"the upstream's {response.status_code} body broke off ({self.cause})")


def split_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """``messages.create`` keyword arguments that put exactly ``body`` on the wire.

    Fields ``create()`` knows go as arguments; the rest (``temperature``, ``top_p``, ``top_k``,
    which SDK 2.x removed, and anything newer than the SDK) go through ``extra_body``. The
    beta values (:data:`BETAS_FIELD`) are headers (:func:`beta_headers`), not body fields.
    """
    typed = {k: v for k, v in body.items() if k in TYPED_BODY_FIELDS}
    extra = {k: v for k, v in body.items() if k not in TYPED_BODY_FIELDS and k != BETAS_FIELD}
    return {**typed, "extra_body": extra} if extra else typed


def beta_headers(body: Mapping[str, Any]) -> dict[str, str | anthropic.Omit]:
    """The anthropic-beta header of a planned body: its beta values, or none at all (an
    ``Omit``, so no anthropic-beta from the environment goes with a request that has none)."""
    betas = body.get(BETAS_FIELD)
    return {"anthropic-beta": ",".join(betas) if betas else anthropic.Omit()}


# The API version of a transport that reads it from the body (Bedrock, Vertex).
VERSION_FIELD = "anthropic_version"


def count_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a planned body ``messages.count_tokens`` takes (:data:`COUNT_BODY_FIELDS`),
    and the body's API version where it has one (a cloud transport's counting endpoint reads
    it as its Messages endpoint does)."""
    counted = {k: v for k, v in body.items() if k in COUNT_BODY_FIELDS}
    if VERSION_FIELD in body:
        counted["extra_body"] = {VERSION_FIELD: body[VERSION_FIELD]}
    return counted


def read_body(response: httpx2.Response) -> bytes:
    """The whole body of a 2xx, read under the provider's control.

    A body that breaks off is not a connection error: the status line says the upstream
    accepted (and likely did) the work, so it is :class:`TruncatedResponse`, never retried.
    """
    try:
        return response.read()
    except httpx2.TransportError as exc:  # peer closed early, read timeout, reset
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:  # a content-encoding that does not decode
        raise MalformedResponse(response) from None


async def aread_body(response: httpx2.Response) -> bytes:
    """:func:`read_body` for the async client."""
    try:
        return await response.aread()
    except httpx2.TransportError as exc:
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:
        raise MalformedResponse(response) from None


def parse_message(response: httpx2.Response, content: bytes) -> dict[str, Any]:
    """The JSON message in a 200 body, or :class:`MalformedResponse`."""
    try:
        parsed = json.loads(content)
    except ValueError:
        raise MalformedResponse(response) from None
    if not isinstance(parsed, dict) or parsed.get("type") != "message":
        raise MalformedResponse(response)
    return parsed


# Headers about the body's encoding on the wire; the in-memory copy holds the decoded bytes.
_WIRE_ENCODING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def assemble_stream(
    client: anthropic.Anthropic, response: httpx2.Response, content: bytes
) -> dict[str, Any]:
    """The message a 200 event stream adds up to, from its already-read (decoded) ``content``.

    The SDK does the work: its ``Stream`` decodes the events and raises an in-stream
    ``error`` event as an ``APIStatusError`` (status 200, the event's error type), and its
    ``MessageStream`` accumulates the rest. Anything else that stops the stream adding up to
    a message (an event whose data is not JSON, no ``message_start``, events out of order) is
    :class:`MalformedResponse`. The events are read from a copy of the response held in
    memory, so a reply from the sync and from the async client take this one path.
    """
    in_memory = httpx2.Response(
        response.status_code,
        headers=[
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in _WIRE_ENCODING_HEADERS
        ],
        content=content,
        request=response.request,
    )
    events: anthropic.Stream[Any] = anthropic.Stream(
        cast_to=cast(Any, RawMessageStreamEvent), response=in_memory, client=client
    )
    try:
        message = MessageStream(events, output_format=anthropic.NOT_GIVEN).get_final_message()
        return message.to_dict()
    except anthropic.APIError:  # an in-stream error event: a failed attempt of its own type
        raise
    except Exception:  # noqa: BLE001 - the bytes are all in memory: any failure is the body's
        raise MalformedResponse(response) from None


def iter_body(response: httpx2.Response) -> Iterator[bytes]:
    """A streamed 2xx body chunk by chunk, as it arrives; a body that breaks off is
    :class:`TruncatedResponse` (as in :func:`read_body`)."""
    try:
        yield from response.iter_bytes()
    except httpx2.TransportError as exc:
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:
        raise MalformedResponse(response) from None


async def aiter_body(response: httpx2.Response) -> AsyncIterator[bytes]:
    """:func:`iter_body` for the async client."""
    try:
        async for chunk in response.aiter_bytes():
            yield chunk
    except httpx2.TransportError as exc:
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:
        raise MalformedResponse(response) from None


def stream_error(
    client: anthropic.Anthropic, response: httpx2.Response, body: object
) -> anthropic.APIStatusError:
    """An in-stream ``error`` event as the SDK's own stream raises it (an ``APIStatusError``
    with the response's status, usually 200, and the event's error type), so :func:`classify`
    sees it exactly as it sees the SDK's."""
    return client._make_status_error(  # the SDK Stream's own mapping
        f"{body}" if isinstance(body, Mapping) else str(body or ""), body=body, response=response
    )


def message_bytes(message: Mapping[str, Any]) -> bytes:
    """A message as JSON bytes: how an assembled (streamed) answer is recorded."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
