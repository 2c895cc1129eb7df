"""The seam to the ``anthropic`` SDK: explicit clients, the exact wire body, one error boundary.

    client = build_client(api_key="sk-...", base_url=None, timeout=timeout)
    kwargs = split_body({"model": "m", "max_tokens": 5, "messages": [...], "temperature": 0})
    # -> typed create() arguments, plus extra_body={"temperature": 0}
    failure = classify(exc, secrets=("sk-...",), body=body)   # any SDK error -> Failure

Everything here exists so that the provider never guesses at what the SDK did: the client reads
no ANTHROPIC_* setting it was not given, the body bytes are the ones the SDK produced, and each
SDK exception becomes one plain :class:`Failure` in one place.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic.resources.messages import Messages

from gateway.providers._retry import is_retryable, parse_retry_after

DEFAULT_BASE_URL = "https://api.anthropic.com"

# Headers the gateway lets onto the wire. ANTHROPIC_CUSTOM_HEADERS is read by the SDK
# constructor whatever we pass, so anything outside this list is removed just before sending:
# a compliance gateway sends what it chose, nothing an environment variable added.
ALLOWED_HEADERS = frozenset(
    {
        "host",
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "user-agent",
        "authorization",
        "anthropic-version",
    }
)
_SDK_TELEMETRY_PREFIX = "x-stainless-"  # SDK version, OS and retry count: no secrets, no content

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

_MESSAGE_LIMIT = 200


class MalformedResponse(Exception):
    """HTTP 200 whose body is not a Messages API message; raised by the provider."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        super().__init__("the upstream answered 200 with a body that is not a message")


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the retry loop needs it."""

    status: int | None
    error_type: str
    message: str
    upstream_request_id: str | None
    retry_after_s: float | None
    retryable: bool
    request_bytes: bytes | None


def split_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """``messages.create`` keyword arguments that put exactly ``body`` on the wire.

    Fields ``create()`` knows go as arguments; the rest (``temperature``, ``top_p``, ``top_k``,
    which SDK 2.x removed, and anything newer than the SDK) go through ``extra_body``.
    """
    typed = {k: v for k, v in body.items() if k in TYPED_BODY_FIELDS}
    extra = {k: v for k, v in body.items() if k not in TYPED_BODY_FIELDS}
    return {**typed, "extra_body": extra} if extra else typed


def _strip_unchosen_headers(request: httpx2.Request) -> None:
    for name in list(request.headers.keys()):
        lowered = name.lower()
        if lowered not in ALLOWED_HEADERS and not lowered.startswith(_SDK_TELEMETRY_PREFIX):
            del request.headers[name]


async def _astrip_unchosen_headers(request: httpx2.Request) -> None:
    _strip_unchosen_headers(request)


def client_options(
    *, api_key: str, base_url: str | None, timeout: httpx2.Timeout
) -> dict[str, Any]:
    # An explicit api_key stops the SDK reading ANTHROPIC_API_KEY / AUTH_TOKEN, profiles and
    # config files; an explicit base_url stops it reading ANTHROPIC_BASE_URL.
    return {
        "api_key": api_key,
        "base_url": base_url or DEFAULT_BASE_URL,
        "timeout": timeout,
        "max_retries": 0,  # the gateway owns retries, so that every attempt is recorded
    }


def build_client(
    *, api_key: str, base_url: str | None, timeout: httpx2.Timeout
) -> anthropic.Anthropic:
    http = anthropic.DefaultHttpxClient(event_hooks={"request": [_strip_unchosen_headers]})
    return anthropic.Anthropic(
        **client_options(api_key=api_key, base_url=base_url, timeout=timeout), http_client=http
    )


def build_async_client(
    *, api_key: str, base_url: str | None, timeout: httpx2.Timeout
) -> anthropic.AsyncAnthropic:
    http = anthropic.DefaultAsyncHttpxClient(event_hooks={"request": [_astrip_unchosen_headers]})
    return anthropic.AsyncAnthropic(
        **client_options(api_key=api_key, base_url=base_url, timeout=timeout), http_client=http
    )


class _BodyCaptured(Exception):
    def __init__(self, content: bytes) -> None:
        self.content = content
        super().__init__("request body captured; not sent")


class _CaptureTransport(httpx2.BaseTransport):
    """A transport that records the request the SDK built and sends nothing."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        raise _BodyCaptured(request.read())


def build_capture_client() -> anthropic.Anthropic:
    """A client whose requests never leave the process; see :func:`wire_bytes`."""
    return anthropic.Anthropic(
        api_key="capture-only",
        base_url="http://capture.invalid",
        max_retries=0,
        timeout=httpx2.Timeout(60.0),
        http_client=anthropic.DefaultHttpxClient(transport=_CaptureTransport()),
    )


def wire_bytes(capture_client: anthropic.Anthropic, body: Mapping[str, Any]) -> bytes:
    """The body bytes the SDK puts on the wire for ``body``, produced by the SDK itself.

    The SDK's own serialisation runs (same ``create()`` call, same JSON encoder) against a
    transport that keeps the bytes and sends nothing, so this cannot drift from ``send()``.
    """
    try:
        capture_client.messages.create(**split_body(body), timeout=60.0)
    except anthropic.APIConnectionError as exc:
        if isinstance(exc.__cause__, _BodyCaptured):
            return exc.__cause__.content
        raise
    raise RuntimeError("the capture transport did not capture a request")  # pragma: no cover


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def _leaks(message: str, secrets: Iterable[str], body: Mapping[str, Any] | None) -> bool:
    """Whether an upstream message repeats a secret or a piece of the prompt."""
    if any(secret and secret in message for secret in secrets):
        return True
    if body is None:
        return False
    for text in _texts({k: body.get(k) for k in ("system", "messages")}):
        # Whole short texts, and any 24-character window of long ones.
        if len(text) >= 8 and (text in message or _window_in(text, message, 24)):
            return True
    return False


def _window_in(text: str, message: str, width: int) -> bool:
    if len(text) <= width:
        return False
    return any(text[i : i + width] in message for i in range(0, len(text) - width + 1, 4))


def _short(
    status: int | None,
    error_type: str,
    detail: str | None,
    secrets: Iterable[str],
    body: Mapping[str, Any] | None,
) -> str:
    where = f"HTTP {status}" if status is not None else "no HTTP response"
    base = f"{error_type} ({where})"
    if not detail:
        return base
    detail = " ".join(detail.split())[:_MESSAGE_LIMIT]
    if _leaks(detail, secrets, body):
        return f"{base}: [upstream message withheld: it repeated request content or a secret]"
    return f"{base}: {detail}"


def _error_fields(payload: object) -> tuple[str | None, str | None]:
    if isinstance(payload, Mapping):
        error = payload.get("error")
        if isinstance(error, Mapping):
            kind, text = error.get("type"), error.get("message")
            return (
                kind if isinstance(kind, str) else None,
                text if isinstance(text, str) else None,
            )
    return None, None


def _request_bytes(request: httpx2.Request | None) -> bytes | None:
    if request is None:
        return None
    try:
        return request.content
    except httpx2.RequestNotRead:
        return None


def classify(
    exc: Exception, *, secrets: Iterable[str], body: Mapping[str, Any] | None = None
) -> Failure:
    """The one boundary where SDK exceptions become the gateway's view of a failed attempt.

    Never keeps the SDK's own message: it embeds the whole response body. The message built
    here holds the error type, status and at most a short upstream explanation, and drops that
    explanation if it repeats the key or prompt text.
    """
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure(
            None,
            "timeout",
            _short(None, "timeout", "the upstream did not answer in time", secrets, body),
            None,
            None,
            True,
            _request_bytes(exc.request),
        )
    if isinstance(exc, anthropic.APIConnectionError):
        cause = type(exc.__cause__).__name__ if exc.__cause__ else "connection failed"
        return Failure(
            None,
            "connection_error",
            _short(None, "connection_error", cause, secrets, body),
            None,
            None,
            True,
            _request_bytes(exc.request),
        )
    if isinstance(exc, anthropic.APIStatusError):
        response = exc.response
        headers = response.headers
        status = exc.status_code
        body_type, body_message = _error_fields(exc.body)
        error_type = exc.type or body_type or f"http_{status}"
        retryable = is_retryable(status, error_type)
        should_retry = headers.get("x-should-retry")
        if should_retry in ("true", "false") and status != 200:
            # The API says explicitly; it knows (e.g. a 409 that will not clear).
            retryable = should_retry == "true"
        return Failure(
            status=status,
            error_type=error_type,
            message=_short(status, error_type, exc.api_message or body_message, secrets, body),
            upstream_request_id=exc.request_id or headers.get("request-id"),
            retry_after_s=parse_retry_after(headers),
            retryable=retryable,
            request_bytes=_request_bytes(response.request),
        )
    if isinstance(exc, MalformedResponse):
        response = exc.response
        # Not retried: a 200 means the upstream did the work; a second attempt could produce a
        # second, different answer to one recorded request.
        return Failure(
            status=response.status_code,
            error_type="malformed_response",
            message=_short(
                response.status_code,
                "malformed_response",
                "the body is not a Messages API message",
                secrets,
                body,
            ),
            upstream_request_id=response.headers.get("request-id"),
            retry_after_s=None,
            retryable=False,
            request_bytes=_request_bytes(response.request),
        )
    raise TypeError(f"not an upstream failure: {type(exc).__name__}")  # pragma: no cover


UPSTREAM_FAILURES: tuple[type[Exception], ...] = (anthropic.APIError, MalformedResponse)


def parse_message(response: httpx2.Response, content: bytes) -> dict[str, Any]:
    """The JSON message in a 200 body, or :class:`MalformedResponse`."""
    try:
        parsed = json.loads(content)
    except ValueError:
        raise MalformedResponse(response) from None
    if not isinstance(parsed, dict) or parsed.get("type") != "message":
        raise MalformedResponse(response)
    return parsed
