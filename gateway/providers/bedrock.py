"""Claude on AWS Bedrock: its wire profile, its AWS credentials, and the provider built from them.

    provider = BedrockProvider(region="eu-central-1")          # the standard AWS chain
    reply = provider.send(body, api_version="bedrock-2023-05-31", on_attempt_failed=record_attempt)

The SDK's ``AnthropicBedrock`` client does what is Bedrock's: it moves the model id and the
stream flag out of the body into the URL (``POST /model/{modelId}/invoke`` or
``/invoke-with-response-stream``), keeps the body's ``anthropic_version`` (the plan's,
``bedrock-2023-05-31``; it adds its own only to a body without one), and signs each
request with SigV4 through botocore (credentials from the standard chain: environment,
shared files, SSO, instance role; never written by hand here). The Messages call around it is
the shared :class:`~gateway.providers.wire.MessagesProvider`. What is Bedrock's besides: the
``x-amz-*`` headers the signature needs, ``x-amzn-requestid``, error bodies that name their
type in ``x-amzn-errortype`` (``ThrottlingException`` is a rate limit), a streamed answer in
AWS event-stream framing, and no token counting.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import anthropic
import httpx2

from gateway.providers.wire import MessagesProvider, WireProfile

__all__ = ["BEDROCK", "AwsAuth", "BedrockProvider", "EventStreamDecoder", "bedrock_error_fields"]

# Bedrock's exception names, as the Messages API's error types (the retry rules and the
# descriptions are the gateway's, per Messages error type).
_ERROR_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "ThrottlingException": "rate_limit_error",
        "ServiceQuotaExceededException": "rate_limit_error",
        "ServiceUnavailableException": "overloaded_error",
        "ModelNotReadyException": "overloaded_error",
        "ModelTimeoutException": "timeout_error",
        "InternalServerException": "api_error",
        "ValidationException": "invalid_request_error",
        "AccessDeniedException": "permission_error",
        "UnrecognizedClientException": "authentication_error",
        "ResourceNotFoundException": "not_found_error",
        "ModelErrorException": "api_error",
    }
)


def _error_type(name: object) -> str | None:
    if not isinstance(name, str):
        return None
    # "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/" or "...#Name"
    bare = name.split(":", 1)[0].rsplit("#", 1)[-1]
    return _ERROR_TYPES.get(bare)


def bedrock_error_fields(payload: object, headers: httpx2.Headers) -> tuple[str | None, str | None]:
    """Bedrock's error body: ``{"message": ...}``, its type in ``x-amzn-errortype`` (or the
    body's ``__type``); a Messages-shaped body (the model's own error) is read as such."""
    text: str | None = None
    kind: str | None = _error_type(headers.get("x-amzn-errortype"))
    if isinstance(payload, Mapping):
        message = payload.get("message") or payload.get("Message")
        text = message if isinstance(message, str) else None
        kind = kind or _error_type(payload.get("__type"))
        error = payload.get("error")
        if kind is None and isinstance(error, Mapping) and isinstance(error.get("type"), str):
            kind = error["type"]
    return kind, text


class EventStreamDecoder:
    """AWS event-stream frames (botocore's parser: prelude and message CRCs checked) to the
    Messages events they carry: a ``chunk`` event's payload is ``{"bytes": base64(event)}``;
    an ``exception`` frame becomes the stream's ``error`` event."""

    def __init__(self) -> None:
        from botocore.eventstream import EventStreamBuffer

        self._buffer = EventStreamBuffer()

    def feed(self, chunk: bytes) -> Iterable[tuple[str | None, str]]:
        self._buffer.add_data(chunk)
        frames: list[tuple[str | None, str]] = []
        for message in self._buffer:
            headers = message.headers
            kind = headers.get(":message-type")
            if kind == "event" and headers.get(":event-type") == "chunk":
                data = base64.b64decode(json.loads(message.payload)["bytes"]).decode()
                event = json.loads(data).get("type")
                frames.append((event if isinstance(event, str) else None, data))
            elif kind in ("exception", "error"):
                name = headers.get(":exception-type") or headers.get(":error-code")
                try:
                    text = json.loads(message.payload).get("message")
                except ValueError:
                    text = None
                error = {"type": _error_type(name) or "api_error", "message": text or ""}
                frames.append(("error", json.dumps({"type": "error", "error": error})))
        return frames


BEDROCK = WireProfile(
    name="bedrock",
    sync_client=anthropic.AnthropicBedrock,  # type: ignore[arg-type]
    async_client=anthropic.AsyncAnthropicBedrock,  # type: ignore[arg-type]
    default_base_url=None,  # one per region: https://bedrock-runtime.{region}.amazonaws.com
    # The SigV4 signature and what it signs; anthropic-beta goes into the body (anthropic_beta).
    allowed_headers=frozenset(
        {"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}
    ),
    request_id_header="x-amzn-requestid",
    rate_limit_prefix=None,
    error_fields=bedrock_error_fields,
    stream_content_type="application/vnd.amazon.eventstream",
    stream_decoder=EventStreamDecoder,
    hints=MappingProxyType(
        {
            "authentication_error": "Check the AWS credentials the standard chain finds "
            "(AWS_PROFILE, AWS_ACCESS_KEY_ID, the instance role).",
            "permission_error": "Grant bedrock:InvokeModel (and ...WithResponseStream) on "
            "the model or inference profile, and enable model access in the Bedrock console.",
            "not_found_error": "Check the Bedrock model id or inference profile for the "
            "region in the catalog.",
        }
    ),
    counts_tokens=False,
    model_in_url=True,
    capture_credentials=MappingProxyType(
        {"aws_access_key": "capture", "aws_secret_key": "capture", "aws_region": "us-east-1"}
    ),
)


@dataclass(frozen=True)
class AwsAuth:
    """The AWS side of a Bedrock client: the region and, optionally, a named profile; the
    credentials themselves come from botocore's standard chain when the SDK signs."""

    region: str
    profile: str | None = None

    def __post_init__(self) -> None:
        if not self.region:
            raise ValueError("region must not be empty")

    @property
    def secrets(self) -> tuple[str, ...]:
        return ()  # none held here: botocore resolves them per request and signs

    def client_options(self) -> dict[str, Any]:
        # api_key=None would let the SDK read AWS_BEARER_TOKEN_BEDROCK: SigV4 only.
        options: dict[str, Any] = {"aws_region": self.region}
        if self.profile is not None:
            options["aws_profile"] = self.profile
        return options

    def call_headers(self, api_version: str) -> dict[str, str]:
        return {}  # Bedrock takes the version in the body (the plan's anthropic_version)


def bedrock_base_url(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


class BedrockProvider(MessagesProvider):
    """The Messages call over Claude on Bedrock (see the module)."""

    def __init__(
        self,
        *,
        region: str,
        profile: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        max_attempts: int = 4,
        retry_after_cap_s: float = 60.0,
        backoff_base_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(
            BEDROCK,
            AwsAuth(region, profile),
            base_url=base_url or bedrock_base_url(region),
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            retry_after_cap_s=retry_after_cap_s,
            backoff_base_s=backoff_base_s,
            sleep=sleep,
            async_sleep=async_sleep,
        )
