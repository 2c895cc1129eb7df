"""``Gateway.stream`` and ``AsyncGateway.stream``: a streamed request as a context manager.

    with gw.stream("risk_report", "Summarise ...", caller="risk-desk") as s:
        s.request_id                     # known once the intent is committed
        for event in s:                  # Messages API stream events, as the API sent them
            ...
        result = s.result                # the Result complete() would have returned

Entering the block resolves, plans and keys the request, commits its intent (or, in replay
mode, finds the recorded answer) and waits for the first event, so anything that fails before
the stream begins raises from the ``with`` line, with the usual error types. Leaving the block
before the stream ended closes the upstream connection and records CANCELLED (the recorder
does it; see _recording). A replay hit streams the recorded message as events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gateway.providers.base import ProviderReply
from gateway.providers.stream import MessageAssembler, message_events
from gateway.request._call_types import Failed, Intended
from gateway.request._prepared import Hit, Send
from gateway.request._recorded_streams import arecord_stream, record_stream
from gateway.result import Result

if TYPE_CHECKING:
    from gateway.providers.base import Provider
    from gateway.request._call_records import CallRecords
    from gateway.request._prepared import Prepared
    from gateway.request._recording import Recorder

__all__ = [
    "AsyncOpened",
    "AsyncStream",
    "AsyncStreaming",
    "Opened",
    "Outcomes",
    "Replayed",
    "Stream",
    "Streaming",
    "aopened",
    "opened",
]

Event = dict[str, Any]


class Outcomes:
    """The terminal records for one stream (the stream recorder picks which, once)."""

    def __init__(self, records: CallRecords, prepared: Prepared, intended: Intended) -> None:
        self._records = records
        self._prepared = prepared
        self._intended = intended  # committed before anything was sent, so before completed
        self.result: Result | None = None

    @property
    def capped(self) -> Mapping[str, int]:
        return dict(self._prepared.plan.capped)

    def completed(self, reply: ProviderReply) -> None:
        wire = self._intended.wire
        assert wire is not None
        self.result = self._records.record_outcome(self._prepared, reply, wire)

    def failed(self, sent: Failed, partial: MessageAssembler) -> None:
        self._records.record_failed(self._prepared, sent.error, detail=sent.detail, partial=partial)
        sent.raise_error()

    def cancelled(self, partial: MessageAssembler, reason: str) -> None:
        self._records.record_cancelled(self._prepared, reason=reason, partial=partial)

    async def acompleted(self, reply: ProviderReply) -> None:
        wire = self._intended.wire
        assert wire is not None
        self.result = await self._records.arecord_outcome(self._prepared, reply, wire)

    async def afailed(self, sent: Failed, partial: MessageAssembler) -> None:
        await self._records.arecord_failed(
            self._prepared, sent.error, detail=sent.detail, partial=partial
        )
        sent.raise_error()

    async def acancelled(self, partial: MessageAssembler, reason: str) -> None:
        await self._records.arecord_cancelled(self._prepared, reason=reason, partial=partial)


class _StreamBase:
    _cached: Result | None = None
    _outcomes: Outcomes | None = None
    _request_id: str | None = None

    @property
    def request_id(self) -> str:
        """The request's id (the audit log's ``request_id``), known once the block is entered."""
        if self._request_id is None:
            raise RuntimeError("the stream is not open yet: enter its 'with' block first.")
        return self._request_id

    @property
    def cached(self) -> bool:
        """Whether this is a replay hit (the recorded answer, streamed)."""
        return self._cached is not None

    @property
    def capped(self) -> Mapping[str, int]:
        """Values the policy lowered to its ceiling (see ``Result.capped``), once entered."""
        if self._cached is not None:
            return self._cached.capped
        return self._outcomes.capped if self._outcomes is not None else {}

    @property
    def result(self) -> Result:
        """The Result of the whole answer, once the iteration has ended."""
        result = self._cached or (self._outcomes.result if self._outcomes else None)
        if result is None:
            raise RuntimeError(
                "the stream has no result: iterate it to its end first (a stream that failed "
                "or was left early has none)."
            )
        return result


class Stream(_StreamBase):
    """One streamed request (see the module docstring); made by :meth:`Gateway.stream`."""

    def __init__(self, open_stream: Callable[[ExitStack], Opened]) -> None:
        self._open = open_stream
        self._stack = ExitStack()
        self._events: Iterator[Event] = iter(())
        self._first: Event | None = None
        self._close: Callable[[], None] | None = None
        self._throw: Callable[[BaseException], object] | None = None

    def __enter__(self) -> Stream:
        try:
            opened = self._open(self._stack)
            self._request_id = opened.request_id
            match opened:
                case Replayed(result=result, message=message):
                    self._cached = result
                    self._events = message_events(message)
                case Streaming(events=events, outcomes=outcomes):
                    self._outcomes = outcomes
                    self._events = events
                    self._close = getattr(events, "close", None)
                    self._throw = getattr(events, "throw", None)
                    self._first = next(events, None)  # failures before the first event: here
        except BaseException:
            self._finish()
            raise
        return self

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> Event:
        first = self._first
        if first is not None:
            self._first = None
            return first
        return next(self._events)

    def close(self) -> None:
        """End the stream: if it had not ended, the upstream connection is closed and the
        request recorded CANCELLED."""
        self._finish()

    def _finish(self, exc: BaseException | None = None) -> None:
        try:
            close, self._close = self._close, None
            throw, self._throw = self._throw, None
            if isinstance(exc, KeyboardInterrupt) and throw is not None:
                # The interrupt reaches the recorder, so the record says "interrupted".
                with contextlib.suppress(BaseException):
                    throw(exc)
            if close is not None:
                close()
        finally:
            self._stack.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._finish(exc)


class AsyncStream(_StreamBase):
    """One streamed request for asyncio; made by :meth:`AsyncGateway.stream`."""

    def __init__(self, open_stream: Callable[[AsyncExitStack], Awaitable[AsyncOpened]]) -> None:
        self._open = open_stream
        self._stack = AsyncExitStack()
        self._source: AsyncIterator[Event] | None = None
        self._replayed: Iterator[Event] | None = None
        self._first: Event | None = None

    async def __aenter__(self) -> AsyncStream:
        try:
            opened = await self._open(self._stack)
            self._request_id = opened.request_id
            match opened:
                case Replayed(result=result, message=message):
                    self._cached = result
                    self._replayed = message_events(message)
                case AsyncStreaming(events=events, outcomes=outcomes):
                    self._outcomes = outcomes
                    self._source = events
                    try:
                        self._first = await events.__anext__()
                    except StopAsyncIteration:
                        self._first = None
        except BaseException:
            await self._finish()
            raise
        return self

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Event:
        first = self._first
        if first is not None:
            self._first = None
            return first
        if self._source is not None:
            return await self._source.__anext__()
        if self._replayed is not None:
            try:
                return next(self._replayed)
            except StopIteration:
                raise StopAsyncIteration from None
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """``Stream.close`` for asyncio."""
        await self._finish()

    async def _finish(self, exc: BaseException | None = None) -> None:
        try:
            source, self._source = self._source, None
            athrow = getattr(source, "athrow", None)
            if isinstance(exc, asyncio.CancelledError) and athrow is not None:
                # The cancellation reaches the recorder, so the record says "cancelled".
                with contextlib.suppress(BaseException):
                    await athrow(exc)
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            await self._stack.aclose()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._finish(exc)


@dataclass(frozen=True)
class Replayed:
    """A stream opened on a replay hit: its Result and the recorded message to stream."""

    request_id: str
    result: Result
    message: Mapping[str, Any]


@dataclass(frozen=True)
class Streaming:
    """A stream opened upstream: the stream recorder's events, and the outcomes that will
    hold its Result."""

    request_id: str
    events: Iterator[Event]
    outcomes: Outcomes


@dataclass(frozen=True)
class AsyncStreaming:
    """:class:`Streaming` for asyncio."""

    request_id: str
    events: AsyncIterator[Event]
    outcomes: Outcomes


Opened = Replayed | Streaming
AsyncOpened = Replayed | AsyncStreaming


def opened(
    step: Hit | Send,
    recorder: Recorder,
    records: CallRecords,
    provider: Callable[[Prepared], Provider],
) -> Opened:
    """A stream to be sent, recorded as it goes (_recorded_streams), or its hit. ``provider``
    is asked for only when the stream is sent: a hit is served from the log alone."""
    if isinstance(step, Hit):
        return Replayed(step.prepared.request_id, step.result, step.message)
    args, options, outcomes = _streamed(step, recorder, records, provider(step.prepared))
    return Streaming(step.prepared.request_id, record_stream(*args, **options), outcomes)


def aopened(
    step: Hit | Send,
    recorder: Recorder,
    records: CallRecords,
    provider: Callable[[Prepared], Provider],
) -> AsyncOpened:
    """:func:`opened` for asyncio."""
    if isinstance(step, Hit):
        return Replayed(step.prepared.request_id, step.result, step.message)
    args, options, outcomes = _streamed(step, recorder, records, provider(step.prepared))
    return AsyncStreaming(step.prepared.request_id, arecord_stream(*args, **options), outcomes)


def _streamed(
    send: Send, recorder: Recorder, records: CallRecords, provider: Provider
) -> tuple[tuple[Any, ...], dict[str, Any], Outcomes]:
    prepared = send.prepared
    outcomes = Outcomes(records, prepared, send.intended)
    options = {
        "api_version": prepared.plan.api_version,
        "intended": send.intended,
        "outcomes": outcomes,
        "timeout_s": prepared.timeout_s,
    }
    return (recorder, prepared.labels, provider, prepared.body), options, outcomes
