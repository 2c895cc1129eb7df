"""The decisions of one Messages call, for any transport; it never touches a socket or waits.

    call = MessagesCall(body, profile=FIRST_PARTY, auth=auth, api_version="2023-06-01", ...)
    while True:                                   # MessagesProvider's loops, sync or async
        call.start()
        try:
            return call.reply(*attempt(call))     # parse, or raise as a failed attempt
        except UPSTREAM_FAILURES as exc:
            report = call.failed(exc)             # the AttemptFailure to record
        record(report)
        wait(call.next_wait())                    # or the final error, raised

The shape is httpcore's: every decision (what to send, how a read body becomes a reply, what
a failure means, whether to wait or give up) is made here, once; the twin loops in
:mod:`gateway.providers.wire._provider` differ only by ``await``. What differs between
transports comes from the :class:`WireProfile` (request-id and rate-limit headers, the stream's
framing, error bodies, hints); the retry rules are the gateway's (:class:`RetryPolicy`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import anthropic
import httpx2

from gateway.errors import UpstreamRejected, UpstreamUnavailable
from gateway.providers.base import AttemptFailure, ProviderReply, StreamFacts
from gateway.providers.stream import MalformedStream, StreamErrorEvent, StreamRelay
from gateway.providers.wire._body import (
    MalformedResponse,
    TruncatedResponse,
    assemble_stream,
    beta_headers,
    message_bytes,
    parse_message,
    split_body,
    stream_error,
)
from gateway.providers.wire._failures import Failure, classify, hint_for
from gateway.providers.wire._profile import WireAuth, WireProfile
from gateway.providers.wire._retry import RetryPolicy

__all__ = ["MessagesCall"]


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


class MessagesCall:
    """The decisions of one ``send``/``asend``/``stream``/``astream`` call (see the module).

    The twin loops drive it: ``start()`` before each attempt; ``reply(http, content)`` once a
    body is read (it parses the message or assembles the stream, and raises as a failed
    attempt when the body is not one); ``failed(exc)`` for a failed attempt, giving the report;
    then ``next_wait()``, the wait before the next attempt, or the final error, raised.
    """

    def __init__(
        self,
        body: Mapping[str, Any],
        *,
        profile: WireProfile,
        auth: WireAuth,
        api_version: str,
        retry: RetryPolicy,
        stream_client: anthropic.Anthropic,
        timeout: httpx2.Timeout,
        deadline_s: float | None = None,
        wire: bytes | None = None,
    ) -> None:
        self.kwargs = split_body(body)
        # The body's bytes as create() would write them, written once by the gateway (the
        # lean leg, gateway.providers.wire._lean), or None: create() writes them.
        self.wire = wire
        self.timeout = timeout
        # Per-request headers are the SDK's last layer, so nothing from the environment
        # (ANTHROPIC_CUSTOM_HEADERS) can replace the version or the credential.
        self.headers: dict[str, str | anthropic.Omit] = {
            **auth.call_headers(api_version),
            **beta_headers(body),
        }
        self._profile = profile
        self._secrets = auth.secrets
        self._retry = retry
        self._stream_client = stream_client  # the SDK's event decoding needs a (sync) client
        self._started = time.monotonic()
        self._attempt_started = self._started
        self._deadline = None if deadline_s is None else self._started + deadline_s
        self.attempt = 0
        self._last_failure: tuple[Exception, Failure, AttemptFailure] | None = None
        # A stream's state: the current attempt's relay, and whether any event reached the
        # caller (after which nothing is retried: the caller already holds part of an answer).
        self._relay = StreamRelay(profile.stream_decoder())
        self._delivered = False
        self._first_event: float | None = None
        self._first_token: float | None = None

    def start(self) -> None:
        self.attempt += 1
        self._attempt_started = time.monotonic()
        self._relay = StreamRelay(self._profile.stream_decoder())

    # -- a stream ------------------------------------------------------------------------

    def opened(self, http: httpx2.Response) -> httpx2.Response:
        """The response of a stream attempt, once its status line came (a 2xx: the SDK raised
        for the rest); a body that is not an event stream is not a stream's answer."""
        if not http.headers.get("content-type", "").startswith(self._profile.stream_content_type):
            raise MalformedResponse(http)
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
            raise stream_error(self._stream_client, http, exc.body) from None
        except (MalformedStream, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            raise MalformedResponse(http) from None
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

    @property
    def stream_complete(self) -> bool:
        """The stream's ``message_stop`` has arrived: the answer is whole."""
        return self._relay.complete

    def stream_reply(self, http: httpx2.Response) -> ProviderReply:
        """The reply once the body ended: the assembled message, with the stream's facts. A
        stream that ended without ``message_stop`` broke off (the upstream did the work)."""
        relay = self._relay
        if not relay.complete:
            raise TruncatedResponse(http, EOFError())
        message = relay.message()
        now = time.monotonic()
        headers = http.headers
        return ProviderReply(
            status=http.status_code,
            response=message,
            response_bytes=message_bytes(message),
            request_bytes=http.request.content,
            upstream_request_id=headers.get(self._profile.request_id_header),
            latency_ms=_ms(now - self._attempt_started),
            total_ms=_ms(now - self._started),
            attempts=self.attempt,
            rate_limits=self._profile.rate_limits(headers.items()),
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
        """The reply for a read body, or :class:`MalformedResponse` (or an in-stream
        error event's ``APIStatusError``) to be handled as a failed attempt."""
        if self.kwargs.get("stream") is True:
            response = assemble_stream(self._stream_client, http, content)
        else:
            response = parse_message(http, content)
        now = time.monotonic()
        headers = http.headers
        return ProviderReply(
            status=http.status_code,
            response=response,
            response_bytes=content,
            request_bytes=http.request.content,
            upstream_request_id=headers.get(self._profile.request_id_header),
            latency_ms=_ms(now - self._attempt_started),
            total_ms=_ms(now - self._started),
            attempts=self.attempt,
            rate_limits=self._profile.rate_limits(headers.items()),
        )

    def failed(self, exc: Exception) -> AttemptFailure:
        """The report of the failed attempt (``will_retry`` says what :meth:`next_wait` does)."""
        failure = classify(exc, profile=self._profile, secrets=self._secrets)
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
                hint=_unavailable_hint(failure.error_type),
                **fields,
            ) from exc
        raise UpstreamRejected(
            f"the model provider refused the request: {failure.message}.",
            hint=hint_for(self._profile, failure.error_type),
            **fields,
        ) from exc


def _unavailable_hint(error_type: str) -> str:
    if error_type == "connection_error":
        # A refused connection repeats until the address is fixed: say where to look.
        return (
            "Check that the address named is the model provider's and reachable from here "
            "(ANTHROPIC_BASE_URL or the transport's base URL); if it is, try again later."
        )
    return "This is usually temporary; try again later."
