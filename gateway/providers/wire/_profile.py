"""What one Claude transport differs by: a small frozen wire profile, and its credentials.

    FIRST_PARTY = WireProfile(name="anthropic", sync_client=anthropic.Anthropic, ...)
    provider = MessagesProvider(FIRST_PARTY, ApiKeyAuth("sk-..."), base_url=None)

Every Claude transport (the first-party API, AWS Bedrock, Google Vertex AI) is reached through
one of the SDK's own clients, which build the request, sign it and decode the answer; the
Messages call around them (attempts, classification, retry or stop, the stream loop, the
record of the exact bytes) is the same for all (:mod:`gateway.providers.wire`). What differs
is written down here, once per transport, as data and small pure functions:

- how the SDK client is built: its classes and the options that name the credentials
  (:class:`WireAuth`, one per provider instance, never recorded);
- which headers may go on the wire (everything else is stripped before sending, so nothing an
  environment variable adds leaves the gateway), which header names the upstream's request id
  and which carry rate limits;
- how a streamed answer is framed (its content type and the frame decoder);
- how an error body is read (its type and the upstream's own words), whether the upstream
  says itself whether to retry, and the hint a person gets for each error type;
- whether the transport counts tokens.

What the *gateway* asks of a provider without building it (does it honour ``inference_geo``,
which model name does its answer echo) is the registry's :class:`~gateway.providers.base.
Capabilities`, kept free of the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import anthropic
import httpx2

from gateway.providers.stream import FrameDecoder, SSEDecoder

__all__ = [
    "BASE_HEADERS",
    "SDK_TELEMETRY_PREFIX",
    "ErrorFields",
    "WireAuth",
    "WireProfile",
    "error_object_fields",
]

# (error type, the upstream's message) read from an error body and the response's headers.
ErrorFields = Callable[[object, httpx2.Headers], tuple[str | None, str | None]]


class WireAuth(Protocol):
    """One provider instance's credentials, as its transport's SDK client takes them.

    ``client_options()`` are the SDK constructor's keyword arguments that name the credentials
    (explicit, so the SDK reads none from the environment); ``call_headers(api_version)`` the
    per-request headers a call sets (the SDK's last layer, so nothing from the environment can
    replace them); ``secrets`` what must never appear in a log, an error or the audit record;
    ``region`` the cloud region the credentials send to (None: the transport has none).
    """

    @property
    def secrets(self) -> tuple[str, ...]: ...

    @property
    def region(self) -> str | None: ...

    def client_options(self) -> dict[str, Any]: ...

    def call_headers(self, api_version: str) -> dict[str, str]: ...


def error_object_fields(payload: object, _headers: httpx2.Headers) -> tuple[str | None, str | None]:
    """The Messages API's error body: ``{"error": {"type": ..., "message": ...}}``."""
    if isinstance(payload, Mapping):
        error = payload.get("error")
        if isinstance(error, Mapping):
            kind, text = error.get("type"), error.get("message")
            return (
                kind if isinstance(kind, str) else None,
                text if isinstance(text, str) else None,
            )
    return None, None


# The headers every HTTP request of any transport needs; a profile adds its own.
BASE_HEADERS = frozenset(
    {
        "host",
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "user-agent",
    }
)
# The SDK's own telemetry headers (its version, the OS, the retry count): no secrets, no content.
SDK_TELEMETRY_PREFIX = "x-stainless-"


@dataclass(frozen=True)
class WireProfile:
    """How one transport's Messages call differs from another's (see the module)."""

    name: str  # for messages and logs: "anthropic", "bedrock", ...
    sync_client: type[anthropic.Anthropic]
    async_client: type[anthropic.AsyncAnthropic]
    # None: there is none (one per region, say); the provider's factory must give one.
    default_base_url: str | None
    # Allowed onto the wire besides BASE_HEADERS and the SDK's x-stainless-* telemetry.
    allowed_headers: frozenset[str]
    request_id_header: str
    rate_limit_prefix: str | None  # None: the transport reports no rate limits in headers
    error_fields: ErrorFields = error_object_fields
    # A header by which the upstream says whether an error is worth another attempt.
    should_retry_header: str | None = None
    stream_content_type: str = "text/event-stream"
    stream_decoder: Callable[[], FrameDecoder] = SSEDecoder
    # What to do next, per error type, for a person reading the failure (beside the shared ones).
    hints: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    counts_tokens: bool = True
    # The model id (and the stream flag) travel in the URL, not the body: the record of a
    # request then says where it went (on_wire is told the target with the bytes).
    model_in_url: bool = False
    # Where the Messages endpoint is when the URL names no model: the lean leg posts the
    # gateway's own bytes of a body there (gateway.providers.wire._lean). None: every body
    # goes through the SDK's create(), which shapes the URL and the body for the transport.
    messages_path: str | None = None
    # Options for a client that only serialises bodies and sends nothing (the wire capture):
    # credentials of the right shape that are never used.
    capture_credentials: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({"api_key": "capture-only"})
    )

    @property
    def wire_headers(self) -> frozenset[str]:
        """Every header name (lower case) that may go on the wire, but the SDK's telemetry."""
        return BASE_HEADERS | self.allowed_headers

    def rate_limits(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """The rate-limit headers of an answer, as the reply records them."""
        prefix = self.rate_limit_prefix
        if prefix is None:
            return {}
        return {k: v for k, v in headers if k.lower().startswith(prefix)}
