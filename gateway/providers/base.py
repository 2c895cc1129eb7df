"""The provider seam: the Provider protocol, and what every provider hands back (a reply, or
one failed attempt).

Kept apart from the providers so that importing these types does not import the anthropic SDK
(about a second of start-up) for commands that never call Claude.

    reply = ProviderReply(status=200, response={...}, response_bytes=b"...", ...)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from gateway.errors import InputError

__all__ = [
    "AsyncOnAttemptFailed",
    "AttemptFailure",
    "OnAttemptFailed",
    "Provider",
    "ProviderReply",
    "RequestNotHonoured",
]


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


OnAttemptFailed = Callable[[AttemptFailure], None]
AsyncOnAttemptFailed = Callable[[AttemptFailure], Awaitable[None]]


@runtime_checkable
class Provider(Protocol):
    """What the gateway needs of a model provider (in the spirit of httpx's transports).

    ``name`` is the catalog's ``provider`` value. ``wire_bytes(body)`` is the exact body
    ``send(body)`` puts on the wire, recorded before anything is sent. ``model_version`` is
    what fixes the model beyond its id (a local model's weights digest), or ``None`` when the
    id already names a fixed model. ``send``/``asend`` call ``on_attempt_failed`` for every
    failed attempt before any retry (``asend`` awaits it when it returns an awaitable); if
    it raises, nothing more is sent and its exception propagates. A final failure raises
    :class:`gateway.errors.UpstreamError` (or an ``InputError`` for a body the provider
    cannot honour).
    """

    name: str

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes: ...

    def model_version(self, model_id: str) -> str | None: ...

    def send(
        self, body: Mapping[str, Any], *, api_version: str, on_attempt_failed: OnAttemptFailed
    ) -> ProviderReply: ...

    async def asend(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
    ) -> ProviderReply: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...
