"""The provider seam: the Provider protocol, and what every provider hands back (a reply, or
one failed attempt).

Kept apart from the providers so that importing these types does not import the anthropic SDK
(about a second of start-up) for commands that never call Claude.

    reply = ProviderReply(status=200, response={...}, response_bytes=b"...", ...)
    for item in provider.stream(body, api_version=..., on_attempt_failed=...):
        ...  # event dicts as the API sent them, then one ProviderReply (the last item)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from gateway.errors import InputError

# A planned body's anthropic-beta values (the field Bedrock and Vertex read in the body): the
# first-party API takes them as the anthropic-beta header, so they leave the body there.
# Here, not in the wire layer, so planning names it without importing the SDK.
BETAS_FIELD = "anthropic_beta"

__all__ = [
    "BETAS_FIELD",
    "AsyncOnAttemptFailed",
    "AsyncOnWire",
    "AttemptFailure",
    "Capabilities",
    "OnAttemptFailed",
    "OnWire",
    "Provider",
    "ProviderReply",
    "RequestNotHonoured",
    "StreamFacts",
    "StreamItem",
    "WireTarget",
]


def _same_model(model_id: str) -> str:
    return model_id


@dataclass(frozen=True)
class Capabilities:
    """What the gateway asks of a provider without building it (the registry answers).

    ``offline``: it answers in-process, sending nothing off the machine. ``inference_geo``:
    it honours the Messages API's ``inference_geo`` and reports where inference ran in the
    answer's ``usage``, so a policy's pinned region is sent and checked. ``echoed_model``:
    the model name an answer to a request for ``model_id`` names (the check that the pinned
    model answered), or ``None`` where the answer names none that can be checked.
    ``body_version``, ``counts_tokens``: see the fields.
    """

    offline: bool = False
    inference_geo: bool = False
    echoed_model: Callable[[str], str | None] = _same_model
    # The API version the transport takes in the body as ``anthropic_version`` (Bedrock's
    # and Vertex's own, whatever the model), or None: the first-party ``anthropic-version``
    # header carries the catalog's version.
    body_version: str | None = None
    # Whether the transport has a token-counting endpoint (Bedrock's InvokeModel has none).
    counts_tokens: bool = True


class StreamFacts(BaseModel):
    """What a streamed answer adds to its reply: the raw event stream's digest and size (the
    reply's ``response_bytes`` are the assembled message), and when the first token came."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    events_digest: str  # "sha256:<hex>" of the event-stream bytes exactly as received
    event_bytes: int
    events: int  # events received, pings not counted
    first_event_ms: float | None  # from the start of the call (every attempt, every wait)
    first_token_ms: float | None  # to the first content_block_delta


class ProviderReply(BaseModel):
    """A successful answer and what it took to get it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: int
    response: dict[str, Any]
    response_bytes: bytes  # the body as received (decoded from any content-encoding)
    request_bytes: bytes  # the body as sent on the successful attempt
    upstream_request_id: str | None
    latency_ms: float  # the successful attempt only
    total_ms: float | None = None  # every attempt and every wait (None: not measured)
    attempts: int
    rate_limits: dict[str, str]
    stream: StreamFacts | None = None  # set when the answer was streamed


class AttemptFailure(BaseModel):
    """One failed attempt, for the audit record.

    ``message`` is safe to print and log: error type, status, upstream request id and fixed
    text. ``upstream_message`` is the upstream's own explanation (the key cut out); it may
    echo prompt text, so it belongs in the audit database only, never in a log or an error.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempt: int
    status: int | None
    error_type: str
    message: str
    upstream_request_id: str | None
    retry_after_s: float | None
    will_retry: bool
    latency_ms: float
    upstream_message: str | None = None

    def audit_data(self) -> dict[str, Any]:
        """The ATTEMPT_FAILED event's data: every field, as recorded by gateway and replay."""
        return self.model_dump(mode="json")


class RequestNotHonoured(InputError):
    """A body the provider cannot honour exactly, found before or while it answers.

    ``message`` may quote the input, so it goes to the audit record only; ``summary`` and
    ``error_type`` are fixed text, safe for errors and logs.
    """

    error_type = "request_not_honoured"
    summary = "the provider could not honour this request."


@dataclass(frozen=True)
class WireTarget:
    """Where a transport whose URL names the model (Bedrock, Vertex) sent a request: the
    method and the URL as sent, and the cloud region it was sent to. No header is part of
    it, so no credential or signature reaches the record."""

    method: str
    url: str
    region: str | None

    def audit_data(self) -> dict[str, str | None]:
        """The REQUEST event's ``target``."""
        return {"method": self.method, "url": self.url, "region": self.region}


OnAttemptFailed = Callable[[AttemptFailure], None]
AsyncOnAttemptFailed = Callable[[AttemptFailure], Awaitable[None]]


class OnWire(Protocol):
    """Told the exact body bytes of an attempt just before they are sent (the recorder commits
    the intent with them); nothing is sent before it returns, and if it raises nothing is
    sent. A transport whose URL names the model also tells ``target`` (a keyword: a
    first-party or local request's body is the whole request, and it is told the bytes only)."""

    def __call__(self, wire: bytes, /, *, target: WireTarget | None = None) -> None: ...


class AsyncOnWire(Protocol):
    """:class:`OnWire` for asyncio, awaited before anything is sent."""

    def __call__(self, wire: bytes, /, *, target: WireTarget | None = None) -> Awaitable[None]: ...


# What a stream yields: event dicts (one Messages API event each, as sent), then, last, the
# ProviderReply of the whole answer.
StreamItem = dict[str, Any] | ProviderReply


@runtime_checkable
class Provider(Protocol):
    """What the gateway needs of a model provider (in the spirit of httpx's transports).

    ``name`` is the catalog's ``provider`` value. ``send``/``asend``/``stream``/``astream``
    build the request once and, when given ``on_wire``, call it with the exact body bytes of
    each attempt just before they are sent (``asend``/``astream`` await it when it returns an
    awaitable); nothing goes out before it returns, and if it raises nothing is sent and its
    exception propagates as itself. The recorder commits the intent there, so what is
    recorded is what the request carries, built once. ``wire_bytes(body)`` gives the same
    bytes without sending (a request's bytes known before, or without, a send).
    ``model_version`` is what fixes the model beyond its id (a local model's weights digest),
    or ``None`` when the id already names a fixed model. ``send``/``asend`` call
    ``on_attempt_failed`` for every failed attempt before any retry (``asend`` awaits it
    when it returns an awaitable); if it raises, nothing more is sent and its exception
    propagates. A final failure raises :class:`gateway.errors.UpstreamError` (or an
    ``InputError`` for a body the provider cannot honour).

    ``stream``/``astream`` send a body with ``"stream": true`` and yield each event as it
    arrives, then the :class:`ProviderReply` (its ``response`` the assembled message, its
    ``stream`` the facts of the event stream). Failed attempts before the first event are
    retried as ``send`` retries them; once an event has been yielded nothing is retried.
    Closing the iterator early closes the upstream connection. ``timeout_s`` (if given) is
    the longest wait for the upstream to start answering or between two reads; no attempt
    starts after it has passed.

    ``count_tokens(body)`` is the number of input tokens the provider counts for ``body`` (a
    planned request; fields that do not change the input, such as ``max_tokens``, are left
    out of what it sends to count); ``on_wire`` is told the exact bytes it sends to count, as
    ``send``'s is. It generates nothing and is tried once; a failure raises
    :class:`gateway.errors.UpstreamError`.
    """

    name: str

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes: ...

    def model_version(self, model_id: str) -> str | None: ...

    def send(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | None = None,
    ) -> ProviderReply: ...

    async def asend(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | AsyncOnWire | None = None,
    ) -> ProviderReply: ...

    def stream(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | None = None,
    ) -> Iterator[StreamItem]: ...

    def astream(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | AsyncOnWire | None = None,
    ) -> AsyncIterator[StreamItem]: ...

    def count_tokens(
        self, body: Mapping[str, Any], *, api_version: str, on_wire: OnWire | None = None
    ) -> int: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...
