"""A streamed call, recorded: each event forwarded as it arrives, then exactly one terminal
outcome however the iteration ends, through the caller's :class:`StreamOutcomes` (completed:
RESPONSE; an error mid-stream: FAILED with the partial answer; the caller closed the stream,
was cancelled or interrupted: CANCELLED with the partial answer). The outcome is claimed in a
``finally``, so no way out misses it. The intent and each failed attempt are committed by the
recorder (_recording), exactly as for a call that is not streamed.

    events = record_stream(recorder, call, provider, body, api_version="2023-06-01",
                           intended=intended, outcomes=outcomes)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from gateway.errors import AuditError
from gateway.providers.base import AttemptFailure, Provider, ProviderReply
from gateway.providers.stream import MessageAssembler
from gateway.request._call_types import (
    CallLabels,
    Intended,
    StreamOutcomes,
    Terminal,
    cancel_reason,
    failed,
    unannounced,
)
from gateway.request._recording import Recorder

__all__ = ["arecord_stream", "record_stream"]


# The same mirrored shape as Recorder.call/acall. Events go to the caller as they come;
# the terminal outcome is claimed once (Terminal), by the reply, the failure, or the finally.


def record_stream(
    recorder: Recorder,
    call: CallLabels,
    provider: Provider,
    body: Mapping[str, Any],
    *,
    api_version: str,
    intended: Intended,
    outcomes: StreamOutcomes,
    timeout_s: float | None = None,
) -> Iterator[dict[str, Any]]:
    """Stream a body, its intent committed first (as in :meth:`Recorder.call`): each event,
    then one terminal record (none when the intent was never committed: nothing was sent)."""

    def on_attempt_failed(failure: AttemptFailure) -> None:
        recorder.attempt_failed(call, failure)

    partial = MessageAssembler()
    terminal = Terminal()
    source = provider.stream(
        body,
        api_version=api_version,
        on_attempt_failed=on_attempt_failed,
        timeout_s=timeout_s,
        on_wire=recorder.on_wire_for(call, intended),
    )
    reason = "closed"
    try:
        for item in source:
            if not intended.committed:  # nothing reaches the caller from an unrecorded request
                raise unannounced(provider.name, call.request_id)
            if type(item) is dict:
                partial.observe(item)
                yield item
            elif isinstance(item, ProviderReply) and terminal.claim():
                outcomes.completed(item)
                _drain(source)  # the body's end, once the answer is recorded
                return
        raise _NoReply(provider.name)
    except AuditError:
        terminal.claim()  # the intent or an attempt could not be recorded: fail closed
        raise
    except Exception as exc:  # every failure after the intent gets an outcome
        if not terminal.claim():
            raise
        outcomes.failed(failed(provider, call, intended, exc), partial)
    except BaseException as exc:
        reason = cancel_reason(exc)
        raise
    finally:
        cancelled = terminal.claim()
        # Left after message_stop reached the caller: the answer is whole (its reply follows
        # message_stop in the source without a read, gateway.providers.wire).
        whole = _reply_after_stop(source) if cancelled and partial.stopped else None
        _close(source)  # closes the upstream connection of a stream left early
        if whole is not None and intended.committed:
            outcomes.completed(whole)
        elif cancelled and intended.committed:
            outcomes.cancelled(partial, reason)


async def arecord_stream(
    recorder: Recorder,
    call: CallLabels,
    provider: Provider,
    body: Mapping[str, Any],
    *,
    api_version: str,
    intended: Intended,
    outcomes: StreamOutcomes,
    timeout_s: float | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """:func:`record_stream` for asyncio: each record is drafted on the loop and committed
    with no thread waiting, or drafted in a worker thread when large (``StreamOutcomes``'
    ``a`` methods); a terminal record, once begun, is committed even if the task is
    cancelled again meanwhile."""

    async def on_attempt_failed(failure: AttemptFailure) -> None:
        await recorder.aattempt_failed(call, failure)

    partial = MessageAssembler()
    terminal = Terminal()
    source = provider.astream(
        body,
        api_version=api_version,
        on_attempt_failed=on_attempt_failed,
        timeout_s=timeout_s,
        on_wire=recorder.aon_wire_for(call, intended),
    )
    reason = "closed"
    try:
        async for item in source:
            if not intended.committed:
                raise unannounced(provider.name, call.request_id)
            if type(item) is dict:
                partial.observe(item)
                yield item
            elif isinstance(item, ProviderReply) and terminal.claim():
                await outcomes.acompleted(item)
                await _adrain(source)  # the body's end, once the answer is recorded
                return
        raise _NoReply(provider.name)
    except AuditError:
        terminal.claim()
        raise
    except Exception as exc:  # every failure after the intent gets an outcome
        if not terminal.claim():
            raise
        ended = failed(provider, call, intended, exc)
        await outcomes.afailed(ended, partial)
    except BaseException as exc:
        reason = cancel_reason(exc)
        raise
    finally:
        # Claimed before the upstream is closed: a scope that cancels again at every await
        # (Starlette's streaming response does) must not skip the CANCELLED record.
        cancelled = terminal.claim()
        # Left after message_stop reached the caller: the answer is whole, and its reply
        # follows message_stop in the source without a read (gateway.providers.wire).
        whole = await _areply_after_stop(source) if cancelled and partial.stopped else None
        try:
            await _aclose(source)
        finally:
            if whole is not None and intended.committed:
                await outcomes.acompleted(whole)
            elif cancelled and intended.committed:
                await outcomes.acancelled(partial, reason)


class _NoReply(Exception):
    """A provider's stream ended without its reply (a provider bug, recorded as FAILED)."""

    def __init__(self, provider: str) -> None:
        super().__init__(f"the {provider} provider's stream ended without a reply")


def _close(source: object) -> None:
    close = getattr(source, "close", None)
    if close is not None:
        close()


def _reply_after_stop(source: Iterator[Any]) -> ProviderReply | None:
    """:func:`_areply_after_stop` for a blocking source."""
    try:
        item = next(source)
    except BaseException:  # noqa: BLE001 - already leaving: CANCELLED is recorded instead
        return None
    return item if isinstance(item, ProviderReply) else None


def _drain(source: Iterator[Any]) -> None:
    with contextlib.suppress(Exception):
        for _ in source:
            pass


async def _areply_after_stop(source: AsyncIterator[Any]) -> ProviderReply | None:
    """The reply the source holds once ``message_stop`` has passed, or None (a source that
    reads before its reply, fails or is cancelled again)."""
    try:
        item = await source.__anext__()
    except BaseException:  # noqa: BLE001 - already leaving: CANCELLED is recorded instead
        return None
    return item if isinstance(item, ProviderReply) else None


async def _adrain(source: AsyncIterator[Any]) -> None:
    """Let the source read the rest of its body (so its connection is reused)."""
    with contextlib.suppress(Exception):
        async for _ in source:
            pass


async def _aclose(source: object) -> None:
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        await asyncio.shield(aclose())
