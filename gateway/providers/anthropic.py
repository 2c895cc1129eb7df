"""The Anthropic provider: sends one planned wire body to the Messages API, with owned retries.

    provider = AnthropicProvider(api_key=key.get_secret_value(), base_url=base_url)
    reply = provider.send(body, api_version="2023-06-01", on_attempt_failed=record_attempt)
    reply.response["content"], reply.request_bytes, reply.upstream_request_id, reply.attempts

The body is sent exactly: fields ``messages.create()`` knows go as arguments, the rest
(``temperature``/``top_p``/``top_k``, which SDK 2.x removed) through ``extra_body``, with the
``anthropic-version`` header the plan chose. ``wire_bytes(body)`` gives the bytes ``send()``
will put on the wire; the bytes actually sent are captured from the HTTP request itself.

Retries are the gateway's (the SDK's are off): ``on_attempt_failed`` sees every failed attempt,
including the last, *before* any wait; if it raises, nothing more is sent and its exception
propagates (the gateway fails closed when it cannot record an attempt). A 2xx whose body breaks
off while it is read is ``truncated_response`` (status and upstream request id kept) and is not
retried: the upstream did the work. Failure messages never quote the upstream; its own words
are in ``AttemptFailure.upstream_message``, for the audit database only.

Long answers: every request carries an explicit timeout (``timeout_s``), so the SDK's
"streaming required above 21,333 max_tokens" check does not apply and a non-streaming call
with a large ``max_tokens`` is sent as planned. A body with ``"stream": true`` is streamed;
its ``response`` is the accumulated message and ``response_bytes`` the raw event stream.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anthropic
import httpx2
from anthropic.lib.streaming import AsyncMessageStream, MessageStream

from gateway.errors import UpstreamRejected, UpstreamUnavailable
from gateway.providers import _sdk
from gateway.providers._retry import RetryPolicy
from gateway.providers.base import AttemptFailure, ProviderReply

__all__ = ["AnthropicProvider", "AttemptFailure", "ProviderReply"]

_RATE_LIMIT_PREFIX = "anthropic-ratelimit-"


OnAttemptFailed = Callable[[AttemptFailure], None]
AsyncOnAttemptFailed = Callable[[AttemptFailure], Awaitable[None]]


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


class AnthropicProvider:
    """Sends Messages API requests through explicitly built SDK clients (sync and async)."""

    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        max_attempts: int = 4,
        retry_after_cap_s: float = 60.0,
        backoff_base_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not api_key:
            raise ValueError("api_key must not be empty")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self._api_key = api_key
        self._retry = RetryPolicy(
            max_attempts=max_attempts,
            retry_after_cap_s=retry_after_cap_s,
            backoff_base_s=backoff_base_s,
        )
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._timeout = httpx2.Timeout(timeout_s, connect=min(5.0, timeout_s))
        self._base_url = base_url
        self._client = _sdk.build_client(api_key=api_key, base_url=base_url, timeout=self._timeout)
        # Built on first use: a sync-only service never creates an event-loop-bound client.
        self._async_client: anthropic.AsyncAnthropic | None = None
        self._capture = _sdk.build_capture_client()

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self._base_url!r}, api_key=<hidden>)"

    # -- the wire ---------------------------------------------------------------------------

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes:
        """The exact body bytes ``send(body)`` puts on the wire."""
        return _sdk.wire_bytes(self._capture, body)

    def _headers(self, api_version: str) -> dict[str, str]:
        # Per-request headers are the SDK's last layer, so nothing from the environment
        # (ANTHROPIC_CUSTOM_HEADERS) can replace the version or the credential.
        return {"anthropic-version": api_version, "Authorization": f"Bearer {self._api_key}"}

    # -- sync -------------------------------------------------------------------------------

    def send(
        self, body: Mapping[str, Any], *, api_version: str, on_attempt_failed: OnAttemptFailed
    ) -> ProviderReply:
        """Send ``body``; retry what is retryable; return the first success or raise."""
        kwargs = _sdk.split_body(body)
        headers = self._headers(api_version)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            t0 = time.monotonic()
            try:
                return self._attempt(kwargs, headers, attempt, t0, started)
            except _sdk.UPSTREAM_FAILURES as exc:
                delay = self._after_failure(exc, attempt, t0, on_attempt_failed)
            self._sleep(delay)

    def _attempt(
        self,
        kwargs: dict[str, Any],
        headers: dict[str, str],
        attempt: int,
        t0: float,
        started: float,
    ) -> ProviderReply:
        # A streaming-response context: the SDK hands over after the status line, so the body
        # is read here, where a body that breaks off after a 2xx can be told from a failed
        # connection (the SDK would report both as a connection error, and we would retry).
        with self._client.messages.with_streaming_response.create(
            **kwargs, extra_headers=headers, timeout=self._timeout
        ) as raw:
            http = raw.http_response
            content = _sdk.read_body(http)
            if kwargs.get("stream") is True:
                # The SDK parses the already-read events and raises an in-stream error event.
                stream = MessageStream(raw.parse(), output_format=anthropic.NOT_GIVEN)
                try:
                    response = stream.get_final_message().to_dict()
                except ValueError:  # an event whose data is not JSON
                    raise _sdk.MalformedResponse(http) from None
            else:
                response = _sdk.parse_message(http, content)
            return _reply(http, response, content, attempt, t0, started)

    # -- async ------------------------------------------------------------------------------

    async def asend(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
    ) -> ProviderReply:
        """``send`` for asyncio: the AsyncAnthropic client and a non-blocking wait.

        ``on_attempt_failed`` may be a coroutine function: it is awaited before any retry, so
        an audit write can run in a worker thread without the event loop waiting on it."""
        if self._async_client is None:
            self._async_client = _sdk.build_async_client(
                api_key=self._api_key, base_url=self._base_url, timeout=self._timeout
            )
        client = self._async_client
        kwargs = _sdk.split_body(body)
        headers = self._headers(api_version)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            t0 = time.monotonic()
            try:
                async with client.messages.with_streaming_response.create(
                    **kwargs, extra_headers=headers, timeout=self._timeout
                ) as raw:
                    http = raw.http_response
                    content = await _sdk.aread_body(http)
                    if kwargs.get("stream") is True:
                        stream = AsyncMessageStream(
                            await raw.parse(), output_format=anthropic.NOT_GIVEN
                        )
                        try:
                            response = (await stream.get_final_message()).to_dict()
                        except ValueError:  # an event whose data is not JSON
                            raise _sdk.MalformedResponse(http) from None
                    else:
                        response = _sdk.parse_message(http, content)
                    return _reply(http, response, content, attempt, t0, started)
            except _sdk.UPSTREAM_FAILURES as exc:
                delay = await self._after_failure_async(exc, attempt, t0, on_attempt_failed)
            await self._async_sleep(delay)

    # -- shared -----------------------------------------------------------------------------

    def _after_failure(
        self,
        exc: Exception,
        attempt: int,
        t0: float,
        on_attempt_failed: OnAttemptFailed,
    ) -> float:
        """Report the failed attempt, then return the wait before the next one, or raise."""
        report, failure = self._failed_attempt(exc, attempt, t0)
        on_attempt_failed(report)
        return self._delay_or_raise(exc, report, failure)

    async def _after_failure_async(
        self,
        exc: Exception,
        attempt: int,
        t0: float,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
    ) -> float:
        """``_after_failure`` for asend: the report may be awaited (recorded off the loop)."""
        report, failure = self._failed_attempt(exc, attempt, t0)
        outcome = on_attempt_failed(report)
        if inspect.isawaitable(outcome):
            await outcome
        return self._delay_or_raise(exc, report, failure)

    def _failed_attempt(
        self, exc: Exception, attempt: int, t0: float
    ) -> tuple[AttemptFailure, _sdk.Failure]:
        failure = _sdk.classify(exc, secrets=(self._api_key,))
        will_retry = failure.retryable and attempt < self._retry.max_attempts
        report = AttemptFailure(
            attempt=attempt,
            status=failure.status,
            error_type=failure.error_type,
            message=failure.message,
            upstream_request_id=failure.upstream_request_id,
            retry_after_s=failure.retry_after_s,
            will_retry=will_retry,
            latency_ms=_ms(time.monotonic() - t0),
            upstream_message=failure.upstream_message,
        )
        return report, failure

    def _delay_or_raise(
        self, exc: Exception, report: AttemptFailure, failure: _sdk.Failure
    ) -> float:
        attempt = report.attempt
        if report.will_retry:
            return self._retry.delay_s(attempt=attempt, retry_after_s=failure.retry_after_s)
        fields: dict[str, Any] = {
            "status": failure.status,
            "error_type": failure.error_type,
            "upstream_request_id": failure.upstream_request_id,
            "attempts": attempt,
        }
        if failure.retryable:
            raise UpstreamUnavailable(
                f"the model provider kept failing: {failure.message}; gave up after "
                f"{attempt} attempt{'s' if attempt != 1 else ''}.",
                hint="This is usually temporary; try again later.",
                **fields,
            ) from exc
        raise UpstreamRejected(
            f"the model provider refused the request: {failure.message}.",
            hint=_hint_for(failure.error_type),
            **fields,
        ) from exc

    def close(self) -> None:
        self._client.close()
        self._capture.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.close()
            self._async_client = None
        self.close()


def _hint_for(error_type: str) -> str:
    hints = {
        "authentication_error": "Check that ANTHROPIC_API_KEY holds a valid key.",
        "permission_error": "The key is not allowed to use this model or feature.",
        "billing_error": "The account's billing needs attention in the Claude Console.",
        "not_found_error": "Check the model id in the policy against the catalog.",
        "request_too_large": "Shorten the prompt.",
        "malformed_response": "The upstream or a proxy in between sent a broken answer.",
        "truncated_response": (
            "The answer broke off in transit; it was not retried because the upstream may "
            "already have done the work. Check the upstream request id before sending again."
        ),
    }
    return hints.get(error_type, "Fix the request or the policy; retrying will not help.")


def _reply(
    http: httpx2.Response,
    response: dict[str, Any],
    content: bytes,
    attempt: int,
    t0: float,
    started: float,
) -> ProviderReply:
    now = time.monotonic()
    headers = http.headers
    return ProviderReply(
        status=http.status_code,
        response=response,
        response_bytes=content,
        request_bytes=http.request.content,
        upstream_request_id=headers.get("request-id"),
        latency_ms=_ms(now - t0),
        total_ms=_ms(now - started),
        attempts=attempt,
        rate_limits={k: v for k, v in headers.items() if k.lower().startswith(_RATE_LIMIT_PREFIX)},
    )
