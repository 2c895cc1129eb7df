"""The Anthropic provider: sends one planned wire body to the Messages API, with owned retries.

    provider = AnthropicProvider(api_key=key.get_secret_value(), base_url=base_url)
    reply = provider.send(body, api_version="2023-06-01", on_attempt_failed=record_attempt)
    reply.response["content"], reply.request_bytes, reply.upstream_request_id, reply.attempts

The body is sent exactly: fields ``messages.create()`` knows go as arguments, the rest
(``temperature``/``top_p``/``top_k``, which SDK 2.x removed) through ``extra_body``, with the
``anthropic-version`` header the plan chose. Each attempt's request is built once, by the SDK;
its exact body bytes go to ``on_wire`` (the recorder commits the intent with them) from the
httpx request hook, just before they are written, and the reply names the bytes the successful
attempt sent. ``wire_bytes(body)`` gives the same bytes without sending (gateway.providers.
_capture). A token count's bytes go to its own ``on_wire`` the same way.

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

The shape is httpcore's: :class:`_Call` makes every decision of one call (what to send, how a
read body becomes a reply, what a failure means, whether to wait or give up) and does no I/O;
``send``/``asend``, ``_attempt``/``_aattempt`` and ``_report``/``_areport`` are twin loops
around it that differ only by ``await``, so a change cannot land in one twin and miss the other.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2

from gateway.errors import UpstreamRejected, UpstreamUnavailable
from gateway.logging import SdkLogGuard
from gateway.providers import _sdk
from gateway.providers._capture import WireCapture
from gateway.providers._retry import RetryPolicy
from gateway.providers._stream import MalformedStream, StreamErrorEvent, StreamRelay
from gateway.providers.base import (
    AsyncOnAttemptFailed,
    AsyncOnWire,
    AttemptFailure,
    OnAttemptFailed,
    OnWire,
    ProviderReply,
    StreamFacts,
    StreamItem,
)

if TYPE_CHECKING:
    from gateway.providers.base import Provider

__all__ = ["AnthropicProvider", "AttemptFailure", "ProviderReply"]

_RATE_LIMIT_PREFIX = "anthropic-ratelimit-"


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def _per_call_timeout(timeout_s: float) -> httpx2.Timeout:
    if timeout_s <= 0:
        raise ValueError("timeout must be positive")
    return httpx2.Timeout(timeout_s, connect=min(5.0, timeout_s))


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
        self._async_sdk: anthropic.AsyncAnthropic | None = None
        self._capture = WireCapture()
        # Until close(): no SDK log record below WARNING, and none at all that holds the key.
        self._log_guard = SdkLogGuard(secrets=(api_key,)).attach()

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self._base_url!r}, api_key=<hidden>)"

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes:
        """The exact body bytes ``send(body)`` puts on the wire."""
        return self._capture.wire_bytes(body)

    def model_version(self, model_id: str) -> None:
        """``None``: a Claude model id names one fixed model."""
        return None

    def count_tokens(
        self, body: Mapping[str, Any], *, api_version: str, on_wire: OnWire | None = None
    ) -> int:
        """The input tokens ``POST /v1/messages/count_tokens`` counts for ``body`` (its input
        fields only: :func:`_sdk.count_body`); ``on_wire`` is told the exact bytes of that
        request before they are sent, as ``send``'s is. One attempt: a pre-flight check is
        cheap to repeat, and nothing is recorded per attempt."""
        headers = {"anthropic-version": api_version, "Authorization": f"Bearer {self._api_key}"}
        try:
            counted = _sdk.calling(
                lambda: self._client.messages.count_tokens(
                    **_sdk.count_body(body), extra_headers=headers, timeout=self._timeout
                ),
                on_wire,
            )
        except _sdk.UPSTREAM_FAILURES as exc:
            failure = _sdk.classify(exc, secrets=(self._api_key,))
            error = UpstreamUnavailable if failure.retryable else UpstreamRejected
            raise error(
                f"the model provider did not count the request's tokens: {failure.message}.",
                hint=_hint_for(failure.error_type),
                status=failure.status,
                error_type=failure.error_type,
                upstream_request_id=failure.upstream_request_id,
                attempts=1,
            ) from exc
        return int(counted.input_tokens)

    # -- sync -------------------------------------------------------------------------------

    def send(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | None = None,
    ) -> ProviderReply:
        """Send ``body``; retry what is retryable; return the first success or raise."""
        call = self._call(body, api_version, timeout_s)
        while True:
            call.start()
            try:
                return call.reply(*self._attempt(call, on_wire))
            except _sdk.UPSTREAM_FAILURES as exc:
                report = call.failed(exc)
            self._report(on_attempt_failed, report)
            self._sleep(call.next_wait())

    def _attempt(self, call: _Call, on_wire: OnWire | None) -> tuple[httpx2.Response, bytes]:
        # A streaming-response context: the SDK hands over after the status line, so the body
        # is read here, where a body that breaks off after a 2xx can be told from a failed
        # connection (the SDK would report both as a connection error, and we would retry).
        with _sdk.sending(
            self._client.messages.with_streaming_response.create(
                **call.kwargs, extra_headers=call.headers, timeout=call.timeout
            ),
            on_wire,
        ) as raw:
            return raw.http_response, _sdk.read_body(raw.http_response)

    def stream(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | None = None,
    ) -> Iterator[StreamItem]:
        """Send ``body`` as a stream: each event as it arrives, then the reply (see Provider)."""
        call = self._call({**body, "stream": True}, api_version, timeout_s)
        while True:
            call.start()
            try:
                with _sdk.sending(
                    self._client.messages.with_streaming_response.create(
                        **call.kwargs, extra_headers=call.headers, timeout=call.timeout
                    ),
                    on_wire,
                ) as raw:
                    http = call.opened(raw.http_response)
                    for chunk in _sdk.iter_body(http):
                        yield from call.events(http, chunk)
                    yield call.stream_reply(http)
                    return
            except _sdk.UPSTREAM_FAILURES as exc:
                report = call.failed(exc)
            self._report(on_attempt_failed, report)
            self._sleep(call.next_wait())

    @staticmethod
    def _report(on_attempt_failed: OnAttemptFailed, report: AttemptFailure) -> None:
        on_attempt_failed(report)

    # -- async ------------------------------------------------------------------------------

    async def asend(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | AsyncOnWire | None = None,
    ) -> ProviderReply:
        """``send`` for asyncio: the AsyncAnthropic client and a non-blocking wait.

        ``on_attempt_failed`` may be a coroutine function: it is awaited before any retry, so
        an audit write can run in a worker thread without the event loop waiting on it."""
        call = self._call(body, api_version, timeout_s)
        while True:
            call.start()
            try:
                return call.reply(*await self._aattempt(call, on_wire))
            except _sdk.UPSTREAM_FAILURES as exc:
                report = call.failed(exc)
            await self._areport(on_attempt_failed, report)
            await self._async_sleep(call.next_wait())

    async def _aattempt(
        self, call: _Call, on_wire: OnWire | AsyncOnWire | None
    ) -> tuple[httpx2.Response, bytes]:
        async with _sdk.asending(
            self._async_client().messages.with_streaming_response.create(
                **call.kwargs, extra_headers=call.headers, timeout=call.timeout
            ),
            on_wire,
        ) as raw:
            return raw.http_response, await _sdk.aread_body(raw.http_response)

    async def astream(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed,
        timeout_s: float | None = None,
        on_wire: OnWire | AsyncOnWire | None = None,
    ) -> AsyncIterator[StreamItem]:
        """``stream`` for asyncio."""
        call = self._call({**body, "stream": True}, api_version, timeout_s)
        while True:
            call.start()
            try:
                async with _sdk.asending(
                    self._async_client().messages.with_streaming_response.create(
                        **call.kwargs, extra_headers=call.headers, timeout=call.timeout
                    ),
                    on_wire,
                ) as raw:
                    http = call.opened(raw.http_response)
                    async for chunk in _sdk.aiter_body(http):
                        for event in call.events(http, chunk):
                            yield event
                    yield call.stream_reply(http)
                    return
            except _sdk.UPSTREAM_FAILURES as exc:
                report = call.failed(exc)
            await self._areport(on_attempt_failed, report)
            await self._async_sleep(call.next_wait())

    @staticmethod
    async def _areport(
        on_attempt_failed: OnAttemptFailed | AsyncOnAttemptFailed, report: AttemptFailure
    ) -> None:
        outcome = on_attempt_failed(report)
        if inspect.isawaitable(outcome):
            await outcome

    # -- shared -----------------------------------------------------------------------------

    def _call(self, body: Mapping[str, Any], api_version: str, timeout_s: float | None) -> _Call:
        return _Call(
            body,
            api_version=api_version,
            api_key=self._api_key,
            retry=self._retry,
            stream_client=self._client,
            timeout=self._timeout if timeout_s is None else _per_call_timeout(timeout_s),
            deadline_s=timeout_s,
        )

    def _async_client(self) -> anthropic.AsyncAnthropic:
        if self._async_sdk is None:
            self._async_sdk = _sdk.build_async_client(
                api_key=self._api_key, base_url=self._base_url, timeout=self._timeout
            )
        return self._async_sdk

    def close(self) -> None:
        self._client.close()
        self._capture.close()
        self._log_guard.detach()

    async def aclose(self) -> None:
        if self._async_sdk is not None:
            await self._async_sdk.close()
            self._async_sdk = None
        self.close()


if TYPE_CHECKING:

    def _is_a_provider(provider: AnthropicProvider) -> Provider:
        return provider  # mypy proves AnthropicProvider satisfies the Provider protocol


class _Call:
    """The decisions of one ``send``/``asend`` call; it never touches a socket or a clock's wait.

    The twin loops drive it: ``start()`` before each attempt; ``reply(http, content)`` once a
    body is read (it parses the message or assembles the stream, and raises as a failed
    attempt when the body is not one); ``failed(exc)`` for a failed attempt, giving the report;
    then ``next_wait()``, the wait before the next attempt, or the final error, raised.
    """

    def __init__(
        self,
        body: Mapping[str, Any],
        *,
        api_version: str,
        api_key: str,
        retry: RetryPolicy,
        stream_client: anthropic.Anthropic,
        timeout: httpx2.Timeout,
        deadline_s: float | None = None,
    ) -> None:
        self.kwargs = _sdk.split_body(body)
        self.timeout = timeout
        # Per-request headers are the SDK's last layer, so nothing from the environment
        # (ANTHROPIC_CUSTOM_HEADERS) can replace the version or the credential.
        self.headers = {"anthropic-version": api_version, "Authorization": f"Bearer {api_key}"}
        self._secrets = (api_key,)
        self._retry = retry
        self._stream_client = stream_client  # the SDK's event decoding needs a (sync) client
        self._started = time.monotonic()
        self._attempt_started = self._started
        self._deadline = None if deadline_s is None else self._started + deadline_s
        self.attempt = 0
        self._last_failure: tuple[Exception, _sdk.Failure, AttemptFailure] | None = None
        # A stream's state: the current attempt's relay, and whether any event reached the
        # caller (after which nothing is retried: the caller already holds part of an answer).
        self._relay = StreamRelay()
        self._delivered = False
        self._first_event: float | None = None
        self._first_token: float | None = None

    def start(self) -> None:
        self.attempt += 1
        self._attempt_started = time.monotonic()
        self._relay = StreamRelay()

    # -- a stream ------------------------------------------------------------------------

    def opened(self, http: httpx2.Response) -> httpx2.Response:
        """The response of a stream attempt, once its status line came (a 2xx: the SDK raised
        for the rest); a body that is not an event stream is not a stream's answer."""
        if not http.headers.get("content-type", "").startswith("text/event-stream"):
            raise _sdk.MalformedResponse(http)
        return http

    def events(self, http: httpx2.Response, chunk: bytes) -> Iterator[dict[str, Any]]:
        """The events complete in ``chunk`` (to be forwarded), then the attempt's failure if
        it has one: an ``error`` event as the SDK raises it, anything unreadable as a
        malformed response. The events before an error in the same chunk are forwarded
        first: whether they were delivered decides whether the attempt may be retried, and
        that must not depend on how the bytes were cut."""
        try:
            events = self._relay.feed(chunk)
        except StreamErrorEvent as exc:
            yield from self._delivering(exc.preceding)
            raise _sdk.stream_error(self._stream_client, http, exc.body) from None
        except (MalformedStream, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            raise _sdk.MalformedResponse(http) from None
        yield from self._delivering(events)

    def _delivering(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if events:
            if self._first_event is None:
                self._first_event = time.monotonic()
            if self._first_token is None and any(
                e.get("type") == "content_block_delta" for e in events
            ):
                self._first_token = time.monotonic()
            self._delivered = True
        return events

    def stream_reply(self, http: httpx2.Response) -> ProviderReply:
        """The reply once the body ended: the assembled message, with the stream's facts. A
        stream that ended without ``message_stop`` broke off (the upstream did the work)."""
        relay = self._relay
        if not relay.complete:
            raise _sdk.TruncatedResponse(http, EOFError())
        message = relay.message()
        now = time.monotonic()
        headers = http.headers
        return ProviderReply(
            status=http.status_code,
            response=message,
            response_bytes=_sdk.message_bytes(message),
            request_bytes=http.request.content,
            upstream_request_id=headers.get("request-id"),
            latency_ms=_ms(now - self._attempt_started),
            total_ms=_ms(now - self._started),
            attempts=self.attempt,
            rate_limits={
                k: v for k, v in headers.items() if k.lower().startswith(_RATE_LIMIT_PREFIX)
            },
            stream=StreamFacts(
                events_digest=relay.digest(),
                event_bytes=relay.byte_count,
                events=relay.event_count,
                first_event_ms=self._since_start(self._first_event),
                first_token_ms=self._since_start(self._first_token),
            ),
        )

    def _since_start(self, moment: float | None) -> float | None:
        return None if moment is None else _ms(moment - self._started)

    def reply(self, http: httpx2.Response, content: bytes) -> ProviderReply:
        """The reply for a read body, or :class:`_sdk.MalformedResponse` (or an in-stream
        error event's ``APIStatusError``) to be handled as a failed attempt."""
        if self.kwargs.get("stream") is True:
            response = _sdk.assemble_stream(self._stream_client, http, content)
        else:
            response = _sdk.parse_message(http, content)
        now = time.monotonic()
        headers = http.headers
        return ProviderReply(
            status=http.status_code,
            response=response,
            response_bytes=content,
            request_bytes=http.request.content,
            upstream_request_id=headers.get("request-id"),
            latency_ms=_ms(now - self._attempt_started),
            total_ms=_ms(now - self._started),
            attempts=self.attempt,
            rate_limits={
                k: v for k, v in headers.items() if k.lower().startswith(_RATE_LIMIT_PREFIX)
            },
        )

    def failed(self, exc: Exception) -> AttemptFailure:
        """The report of the failed attempt (``will_retry`` says what :meth:`next_wait` does)."""
        failure = _sdk.classify(exc, secrets=self._secrets)
        report = AttemptFailure(
            attempt=self.attempt,
            status=failure.status,
            error_type=failure.error_type,
            message=failure.message,
            upstream_request_id=failure.upstream_request_id,
            retry_after_s=failure.retry_after_s,
            will_retry=failure.retryable
            and not self._delivered
            and self.attempt < self._retry.max_attempts
            and (self._deadline is None or time.monotonic() < self._deadline),
            latency_ms=_ms(time.monotonic() - self._attempt_started),
            upstream_message=failure.upstream_message,
        )
        self._last_failure = (exc, failure, report)
        return report

    def next_wait(self) -> float:
        """Seconds to wait before the next attempt; or, when there is none, the final error."""
        assert self._last_failure is not None, "next_wait() follows failed()"
        exc, failure, report = self._last_failure
        attempt = report.attempt
        if report.will_retry:
            return self._retry.delay_s(attempt=attempt, retry_after_s=failure.retry_after_s)
        fields: dict[str, Any] = {
            "status": failure.status,
            "error_type": failure.error_type,
            "upstream_request_id": failure.upstream_request_id,
            "attempts": attempt,
        }
        if self._delivered:
            error = UpstreamUnavailable if failure.retryable else UpstreamRejected
            raise error(
                f"the stream broke off after part of the answer had reached the caller: "
                f"{failure.message}; it was not sent again.",
                hint="The partial answer is in the request's FAILED event; send the request "
                "again if you need the whole answer.",
                **fields,
            ) from exc
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
