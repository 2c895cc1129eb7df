"""The one boundary where SDK exceptions become the gateway's view of a failed attempt.

    failure = classify(exc, profile=FIRST_PARTY, secrets=("sk-...",))
    failure.error_type, failure.retryable, failure.message   # no prompt text, no key

The SDK's exception classes are the same for every transport; what differs (where the error
type and the upstream's words are in an error body, the request-id header, whether the
upstream says itself to retry) comes from the transport's :class:`WireProfile`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import anthropic
import httpx2

from gateway.providers.wire._body import MalformedResponse, TruncatedResponse
from gateway.providers.wire._profile import WireProfile
from gateway.providers.wire._retry import is_retryable, parse_retry_after
from gateway.providers.wire._transport import cause_name

__all__ = ["UPSTREAM_FAILURES", "Failure", "classify", "describe", "hint_for"]


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the retry loop needs it."""

    status: int | None
    error_type: str
    message: str  # type, status, upstream request id and fixed text: safe to print and log
    upstream_request_id: str | None
    retry_after_s: float | None
    retryable: bool
    request_bytes: bytes | None
    upstream_message: str | None = None  # the upstream's words: may echo the prompt


# The only words a failure message carries after its type and status: fixed text chosen here.
# The upstream's own message is never put into it: an upstream may echo any part of the request
# (a prompt of short lines, an IBAN, a name), and no filter can tell an echo from an explanation.
_DESCRIPTIONS: dict[str, str] = {
    "timeout": "the upstream did not answer in time",
    "connection_error": "the connection failed before a complete answer arrived",
    "malformed_response": "the body is not a Messages API message",
    "truncated_response": "the body broke off before it was complete; the upstream may have "
    "done the work",
    "invalid_request_error": "the upstream found the request invalid",
    "authentication_error": "the upstream did not accept the credentials",
    "permission_error": "the credentials may not use this model or feature",
    "billing_error": "the account cannot be billed",
    "not_found_error": "the upstream does not know the model or endpoint",
    "request_too_large": "the request is too large",
    "rate_limit_error": "the rate limit was reached",
    "timeout_error": "the upstream timed out",
    "conflict_error": "the upstream reported a conflict",
    "api_error": "the upstream had an internal error",
    "overloaded_error": "the upstream is overloaded",
}
_GENERIC = "the upstream reported an error"
_ERROR_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
UPSTREAM_MESSAGE_LIMIT = 2000


def _safe_error_type(value: str | None, status: int | None) -> str:
    # The type comes from the upstream too: only a plain identifier is kept.
    if value is not None and _ERROR_TYPE.fullmatch(value):
        return value
    return f"http_{status}" if status is not None else "upstream_error"


def _safe_request_id(value: str | None) -> str | None:
    return value if value is not None and _REQUEST_ID.fullmatch(value) else None


def describe(
    status: int | None,
    error_type: str,
    upstream_request_id: str | None,
    cause: str | None = None,
    *,
    origin: str | None = None,
) -> str:
    """The one-line, content-free description of a failed attempt."""
    where = [f"HTTP {status}" if status is not None else "no HTTP response"]
    if origin is not None:  # no answer at all: which address did not answer is the clue
        where[0] += f" from {origin}"
    if upstream_request_id is not None:
        where.append(f"upstream request {upstream_request_id}")
    text = _DESCRIPTIONS.get(error_type, _GENERIC)
    if cause is not None:  # a class name of our HTTP library, never upstream text
        text = f"{text} ({cause})"
    return f"{error_type} ({', '.join(where)}): {text}"


def _upstream_message(detail: str | None, secrets: Iterable[str]) -> str | None:
    """The upstream's own words, for the audit database only (prompt text may go there).

    Secrets may not go anywhere, so any secret it repeats is cut out.
    """
    if not detail:
        return None
    for secret in secrets:
        if secret:
            detail = detail.replace(secret, "[secret withheld]")
    return detail[:UPSTREAM_MESSAGE_LIMIT]


def _request_bytes(request: httpx2.Request | None) -> bytes | None:
    if request is None:
        return None
    try:
        return request.content
    except httpx2.RequestNotRead:
        return None


def classify(exc: Exception, *, profile: WireProfile, secrets: Iterable[str]) -> Failure:
    """The one boundary where SDK exceptions become the gateway's view of a failed attempt.

    Never keeps the SDK's own message: it embeds the whole response body. ``message`` holds
    only the error type, status, upstream request id and a fixed description; the upstream's
    own explanation goes to ``upstream_message`` (secrets cut out), for the audit record only.
    """
    if isinstance(exc, anthropic.APITimeoutError):
        return _no_response("timeout", None, exc.request)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = cause_name(exc.__cause__) if exc.__cause__ else None
        return _no_response("connection_error", cause, exc.request)
    if isinstance(exc, httpx2.TransportError):
        # Only from reading an error status's body (the SDK reads it outside its own
        # wrapping when the body is streamed): the status line came, its explanation did not.
        return _no_response("connection_error", cause_name(exc), _request_of(exc))
    if isinstance(exc, anthropic.APIStatusError):
        response = exc.response
        headers = response.headers
        status = exc.status_code
        body_type, body_message = profile.error_fields(exc.body, headers)
        error_type = _safe_error_type(exc.type or body_type, status)
        retryable = is_retryable(status, error_type)
        if profile.should_retry_header is not None:
            should_retry = headers.get(profile.should_retry_header)
            if should_retry in ("true", "false") and status != 200:
                # The API says explicitly; it knows (e.g. a 409 that will not clear).
                retryable = should_retry == "true"
        request_id = _safe_request_id(exc.request_id or headers.get(profile.request_id_header))
        return Failure(
            status=status,
            error_type=error_type,
            message=describe(status, error_type, request_id),
            upstream_request_id=request_id,
            retry_after_s=parse_retry_after(headers),
            retryable=retryable,
            request_bytes=_request_bytes(response.request),
            upstream_message=_upstream_message(exc.api_message or body_message, secrets),
        )
    if isinstance(exc, MalformedResponse | TruncatedResponse):
        response = exc.response
        request_id = _safe_request_id(response.headers.get(profile.request_id_header))
        error_type = exc.error_type
        cause = exc.cause if isinstance(exc, TruncatedResponse) else None
        # Not retried: a 2xx means the upstream did the work; a second attempt could run the
        # request twice and produce a second, different answer to one recorded request.
        return Failure(
            status=response.status_code,
            error_type=error_type,
            message=describe(response.status_code, error_type, request_id, cause),
            upstream_request_id=request_id,
            retry_after_s=None,
            retryable=False,
            request_bytes=_request_bytes(response.request),
        )
    raise TypeError(f"not an upstream failure: {type(exc).__name__}")  # pragma: no cover


def _no_response(error_type: str, cause: str | None, request: httpx2.Request | None) -> Failure:
    return Failure(
        status=None,
        error_type=error_type,
        message=describe(None, error_type, None, cause, origin=_origin(request)),
        upstream_request_id=None,
        retry_after_s=None,
        retryable=True,
        request_bytes=_request_bytes(request),
    )


def _origin(request: httpx2.Request | None) -> str | None:
    """The scheme, host and port the request went to: never a path, query or credentials."""
    if request is None:
        return None
    url = request.url
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


def _request_of(exc: httpx2.TransportError) -> httpx2.Request | None:
    try:
        return exc.request
    except RuntimeError:  # httpx raises when the error was built without a request
        return None


UPSTREAM_FAILURES: tuple[type[Exception], ...] = (
    anthropic.APIError,
    MalformedResponse,
    TruncatedResponse,
    httpx2.TransportError,
)


# What to do next, per error type, whatever the transport; a profile adds its own (which
# credentials to check, where billing is managed).
_HINTS: dict[str, str] = {
    "not_found_error": "Check the model id in the policy against the catalog.",
    "request_too_large": "Shorten the prompt.",
    "malformed_response": "The upstream or a proxy in between sent a broken answer.",
    "truncated_response": (
        "The answer broke off in transit; it was not retried because the upstream may "
        "already have done the work. Check the upstream request id before sending again."
    ),
}


def hint_for(profile: WireProfile, error_type: str) -> str:
    """The hint a final failure of ``error_type`` carries for a person."""
    hint = profile.hints.get(error_type) or _HINTS.get(error_type)
    return hint or "Fix the request or the policy; retrying will not help."
