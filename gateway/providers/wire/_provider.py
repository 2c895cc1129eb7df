"""One provider-neutral Messages call over any Claude transport: the sync and async twin loops.

    provider = MessagesProvider(FIRST_PARTY, ApiKeyAuth(key), base_url=None)
    reply = provider.send(body, api_version="2023-06-01", on_attempt_failed=record_attempt)
    reply.response["content"], reply.request_bytes, reply.upstream_request_id, reply.attempts

The body is sent exactly: fields ``messages.create()`` knows go as arguments, the rest
(``temperature``/``top_p``/``top_k``, which SDK 2.x removed) through ``extra_body``, with the
per-request headers the transport's credentials set (the first-party API: the
``anthropic-version`` the plan chose). Each attempt's request is built once, by the
transport's SDK client; its exact body bytes go to ``on_wire`` (the recorder commits the intent
with them) from the httpx request hook, just before they are written, and the reply names the
bytes the successful attempt sent. ``wire_bytes(body)`` gives the same bytes without sending
(:mod:`gateway.providers.wire._capture`). A token count's bytes go to its own ``on_wire`` the
same way.

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

Every decision is :class:`~gateway.providers.wire._call.MessagesCall`'s; ``send``/``asend``,
``stream``/``astream``, ``_attempt``/``_aattempt`` and ``_report``/``_areport`` are twin
loops around it that differ only by ``await``, so a change cannot land in one twin and miss
the other. What differs between transports is the :class:`WireProfile` and its
:class:`WireAuth`; a transport's provider is this class given those two.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2

from gateway.errors import UpstreamRejected, UpstreamUnavailable
from gateway.logging import SdkLogGuard
from gateway.providers.base import (
    AsyncOnAttemptFailed,
    AsyncOnWire,
    AttemptFailure,
    OnAttemptFailed,
    OnWire,
    ProviderReply,
    RequestNotHonoured,
    StreamItem,
)
from gateway.providers.wire._announce import asending, calling, sending
from gateway.providers.wire._body import (
    aiter_body,
    aread_body,
    beta_headers,
    count_body,
    iter_body,
    read_body,
)
from gateway.providers.wire._call import MessagesCall
from gateway.providers.wire._capture import WireCapture
from gateway.providers.wire._direct import AsyncDirectPost, DirectPost
from gateway.providers.wire._failures import UPSTREAM_FAILURES, classify, hint_for
from gateway.providers.wire._lean import LeanBody, alean_request, lean_request
from gateway.providers.wire._profile import WireAuth, WireProfile
from gateway.providers.wire._retry import RetryPolicy
from gateway.providers.wire._sdk import build_async_client, build_client

if TYPE_CHECKING:
    from gateway.providers.base import Provider

__all__ = ["MessagesProvider"]


def _per_call_timeout(timeout_s: float) -> httpx2.Timeout:
    if timeout_s <= 0:
        raise ValueError("timeout must be positive")
    return httpx2.Timeout(timeout_s, connect=min(5.0, timeout_s))


class MessagesProvider:
    """Sends Messages API requests over one transport, through explicitly built SDK clients
    (sync and async). ``name`` is the registry's name for it (the profile's by default)."""

    name: str

    def __init__(
        self,
        profile: WireProfile,
        auth: WireAuth,
        *,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        max_attempts: int = 4,
        retry_after_cap_s: float = 60.0,
        backoff_base_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.name = profile.name
        self._profile = profile
        self._auth = auth
        self._retry = RetryPolicy(
            max_attempts=max_attempts,
            retry_after_cap_s=retry_after_cap_s,
            backoff_base_s=backoff_base_s,
        )
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._timeout = httpx2.Timeout(timeout_s, connect=min(5.0, timeout_s))
        self._base_url = base_url
        self._client = build_client(profile, auth, base_url=base_url, timeout=self._timeout)
        # The lean leg's send, past the SDK's per-request machinery (None: through it).
        self._direct = DirectPost.for_client(self._client)
        # Built on first use: a sync-only service never creates an event-loop-bound client.
        self._async_sdk: anthropic.AsyncAnthropic | None = None
        self._adirect: AsyncDirectPost | None = None  # the async lean leg's send, with it
        self._capture = WireCapture(profile.sync_client, profile.capture_credentials)
        # The lean leg: where the transport's URL names no model and the SDK agrees with the
        # gateway's bytes, a body's bytes are written once, here, and posted as they are.
        self._lean = LeanBody(self._capture) if profile.messages_path is not None else None
        # Until close(): no SDK log record below WARNING, and none at all that holds a secret.
        self._log_guard = SdkLogGuard(secrets=auth.secrets).attach()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self._base_url!r}, credentials=<hidden>)"

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes:
        """The exact body bytes ``send(body)`` puts on the wire."""
        lean = None if self._lean is None else self._lean.wire_bytes(body)
        return lean if lean is not None else self._capture.wire_bytes(body)

    def model_version(self, model_id: str) -> None:
        """``None``: a Claude model id names one fixed model."""
        return None

    def count_tokens(
        self, body: Mapping[str, Any], *, api_version: str, on_wire: OnWire | None = None
    ) -> int:
        """The input tokens ``POST /v1/messages/count_tokens`` counts for ``body`` (its input
        fields only: :func:`~gateway.providers.wire._body.count_body`); ``on_wire`` is told the
        exact bytes of that request before they are sent, as ``send``'s is. One attempt: a
        pre-flight check is cheap to repeat, and nothing is recorded per attempt. A transport
        that counts no tokens refuses before anything is sent."""
        if not self._profile.counts_tokens:
            raise RequestNotHonoured(f"the {self.name} transport does not count tokens.")
        headers = {**self._auth.call_headers(api_version), **beta_headers(body)}
        try:
            counted = calling(
                lambda: self._client.messages.count_tokens(
                    **count_body(body), extra_headers=headers, timeout=self._timeout
                ),
                on_wire,
            )
        except UPSTREAM_FAILURES as exc:
            failure = classify(exc, profile=self._profile, secrets=self._auth.secrets)
            error = UpstreamUnavailable if failure.retryable else UpstreamRejected
            raise error(
                f"the model provider did not count the request's tokens: {failure.message}.",
                hint=hint_for(self._profile, failure.error_type),
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
            except UPSTREAM_FAILURES as exc:
                report = call.failed(exc)
            self._report(on_attempt_failed, report)
            self._sleep(call.next_wait())

    def _attempt(self, call: MessagesCall, on_wire: OnWire | None) -> tuple[httpx2.Response, bytes]:
        # A streaming-response context: the SDK hands over after the status line, so the body
        # is read here, where a body that breaks off after a 2xx can be told from a failed
        # connection (the SDK would report both as a connection error, and we would retry).
        with sending(self._open(call), on_wire) as raw:
            return raw.http_response, read_body(raw.http_response)

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
                with sending(self._open(call), on_wire) as raw:
                    http = call.opened(raw.http_response)
                    chunks = iter_body(http)
                    for chunk in chunks:
                        yield from call.events(http, chunk)
                        if call.stream_complete:
                            break
                    yield call.stream_reply(http)  # at message_stop, as astream
                    with contextlib.suppress(Exception):
                        for _ in chunks:  # the body's end, so the connection is reused
                            pass
                    return
            except UPSTREAM_FAILURES as exc:
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
        """``send`` for asyncio: the transport's async SDK client and a non-blocking wait.

        ``on_attempt_failed`` may be a coroutine function: it is awaited before any retry, so
        an audit write can run in a worker thread without the event loop waiting on it."""
        call = self._call(body, api_version, timeout_s)
        while True:
            call.start()
            try:
                return call.reply(*await self._aattempt(call, on_wire))
            except UPSTREAM_FAILURES as exc:
                report = call.failed(exc)
            await self._areport(on_attempt_failed, report)
            await self._async_sleep(call.next_wait())

    async def _aattempt(
        self, call: MessagesCall, on_wire: OnWire | AsyncOnWire | None
    ) -> tuple[httpx2.Response, bytes]:
        async with asending(self._aopen(call), on_wire) as raw:
            return raw.http_response, await aread_body(raw.http_response)

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
                async with asending(self._aopen(call), on_wire) as raw:
                    http = call.opened(raw.http_response)
                    chunks = aiter_body(http)
                    async for chunk in chunks:
                        for event in call.events(http, chunk):
                            yield event
                        if call.stream_complete:
                            break
                    # The reply as soon as message_stop came, before the body's end is read:
                    # a cancellation while the end is awaited must not cost a whole answer
                    # its RESPONSE. The end is read if asked (the connection is reused).
                    yield call.stream_reply(http)
                    await _drain(chunks)
                    return
            except UPSTREAM_FAILURES as exc:
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

    def _call(
        self, body: Mapping[str, Any], api_version: str, timeout_s: float | None
    ) -> MessagesCall:
        return MessagesCall(
            body,
            profile=self._profile,
            auth=self._auth,
            api_version=api_version,
            retry=self._retry,
            stream_client=self._client,
            timeout=self._timeout if timeout_s is None else _per_call_timeout(timeout_s),
            deadline_s=timeout_s,
            wire=None if self._lean is None else self._lean.wire_bytes(body),
        )

    # One attempt's request, unread: the gateway's bytes posted as they are (the lean leg:
    # straight to the SDK client's HTTP client where its headers are fixed, the direct post,
    # else through its post), or the body through create(); either way the SDK's headers,
    # its HTTP client's send and request hooks, its error types, and the same raw response.

    def _open(self, call: MessagesCall) -> AbstractContextManager[Any]:
        path = self._profile.messages_path
        if call.wire is not None and path is not None:
            if self._direct is not None:
                return self._direct.open(path, call.wire, call.headers, call.timeout)
            return lean_request(self._client, path, call.wire, call.headers, call.timeout)
        return self._client.messages.with_streaming_response.create(
            **call.kwargs, extra_headers=call.headers, timeout=call.timeout
        )

    def _aopen(self, call: MessagesCall) -> AbstractAsyncContextManager[Any]:
        client = self._async_client()
        path = self._profile.messages_path
        if call.wire is not None and path is not None:
            if self._adirect is not None:
                return self._adirect.open(path, call.wire, call.headers, call.timeout)
            return alean_request(client, path, call.wire, call.headers, call.timeout)
        return client.messages.with_streaming_response.create(
            **call.kwargs, extra_headers=call.headers, timeout=call.timeout
        )

    def _async_client(self) -> anthropic.AsyncAnthropic:
        if self._async_sdk is None:
            self._async_sdk = build_async_client(
                self._profile, self._auth, base_url=self._base_url, timeout=self._timeout
            )
            self._adirect = AsyncDirectPost.for_client(self._async_sdk)
        return self._async_sdk

    def close(self) -> None:
        self._client.close()
        self._capture.close()
        self._log_guard.detach()

    async def aclose(self) -> None:
        if self._async_sdk is not None:
            await self._async_sdk.close()
            self._async_sdk = None
            self._adirect = None
        self.close()


if TYPE_CHECKING:

    def _is_a_provider(provider: MessagesProvider) -> Provider:
        return provider  # mypy proves MessagesProvider satisfies the Provider protocol


async def _drain(body: AsyncIterator[bytes]) -> None:
    """Read what follows ``message_stop`` to the body's end (nothing, as a rule), so the
    connection is reused; the answer is already whole, so a failure here changes nothing."""
    with contextlib.suppress(Exception):
        async for _ in body:
            pass
