"""AsyncGateway.stream and the cancellation of plain calls: the same records as the sync twin,
whatever asyncio does to the task."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from gateway import UpstreamError
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.streaming.conftest import (
    MakeAsync,
    events,
    kinds,
    partial_text,
    terminal,
    text_of,
    verified,
)

TEXT = "alpha bravo charlie delta echo foxtrot golf hotel"
PROMPT = "Summarise the exposure of desk 7 to EUR rates"


def test_async_stream_yields_events_and_the_result(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    async def run() -> None:
        fake_api.script(Reply.stream(TEXT, deltas=4, delay=0.01))
        async with make_async() as agw, agw.stream("chat", PROMPT) as s:
            received = [event async for event in s]
            assert text_of(received) == TEXT
            assert s.result.text == TEXT
            assert kinds(db_path, s.request_id) == ["request", "response"]

    asyncio.run(run())
    verified(db_path)


def test_task_cancellation_mid_stream_records_cancelled_and_closes_the_upstream(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=8, delay=0.1))
    ids: list[str] = []

    async def consume(agw: object, mid_stream: asyncio.Event) -> None:
        async with agw.stream("chat", PROMPT) as s:  # type: ignore[attr-defined]
            ids.append(s.request_id)
            async for event in s:
                if event["type"] == "content_block_delta":
                    mid_stream.set()

    async def run() -> None:
        async with make_async() as agw:
            mid_stream = asyncio.Event()
            task = asyncio.create_task(consume(agw, mid_stream))
            await asyncio.wait_for(mid_stream.wait(), 30)  # a delta has arrived, seven to come
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(run())
    end = terminal(db_path, ids[0])
    assert str(end.kind) == "cancelled" and end.data["reason"] == "cancelled"
    assert partial_text(db_path, end).startswith("alpha ")
    assert fake_api.stream_closed(1) is True
    verified(db_path)


def test_async_error_event_mid_stream_is_failed(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, delay=0.01, error_after=1))

    async def run() -> str:
        async with make_async() as agw:
            with pytest.raises(UpstreamError) as caught:
                async with agw.stream("chat", PROMPT) as s:
                    async for _event in s:
                        pass
            return str(caught.value.request_id)

    request_id = asyncio.run(run())
    end = terminal(db_path, request_id)
    assert str(end.kind) == "failed" and partial_text(db_path, end) == "alpha bravo "
    verified(db_path)


def test_32_concurrent_streams_each_end_with_one_response(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.set_default(lambda _request: Reply.stream(TEXT, deltas=4, delay=0.01))

    async def one(agw: object, n: int) -> tuple[str, str]:
        async with agw.stream("chat", f"{PROMPT} #{n}") as s:  # type: ignore[attr-defined]
            text = text_of([event async for event in s])
            return s.request_id, text

    async def run() -> list[tuple[str, str]]:
        async with make_async() as agw:
            return await asyncio.gather(*(one(agw, n) for n in range(32)))

    done = asyncio.run(run())
    assert len({request_id for request_id, _ in done}) == 32
    assert all(text == TEXT for _, text in done)
    for request_id, _ in done:
        end = terminal(db_path, request_id)
        assert str(end.kind) == "response" and end.data["usage"]["output_tokens"] == 8
    assert len(fake_api.requests) == 32
    verified(db_path)


def test_async_local_model_streams(make_async: MakeAsync, db_path: Path) -> None:
    async def run() -> None:
        async with make_async() as agw, agw.stream("offline_demo", "The reviewer reads") as s:
            received = [event async for event in s]
            assert text_of(received) == s.result.text

    asyncio.run(run())
    verified(db_path)


def test_a_cancelled_complete_records_cancelled_not_answered(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.slow(2.0))

    async def run() -> None:
        async with make_async() as agw:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(agw.complete("chat", PROMPT), timeout=0.3)

    asyncio.run(run())
    (request,) = [e for e in events(db_path) if str(e.kind) == "request"]
    end = terminal(db_path, request.request_id)
    assert str(end.kind) == "cancelled"
    assert end.data["reason"] == "cancelled" and end.data["answered"] is False
    verified(db_path)


def test_a_complete_cancelled_after_its_answer_arrived_says_so_or_keeps_its_response(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    # Cancelled at every early point in turn: each request still has one terminal outcome.
    fake_api.set_default(lambda _request: Reply.ok(text=TEXT))

    async def run() -> None:
        async with make_async() as agw:
            for delay in (0.0, 0.001, 0.003, 0.01, 0.03):
                task = asyncio.create_task(agw.complete("chat", PROMPT))
                await asyncio.sleep(delay)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    asyncio.run(run())
    for request in [e for e in events(db_path) if str(e.kind) == "request"]:
        end = terminal(db_path, request.request_id)
        if str(end.kind) == "cancelled" and end.data["answered"]:
            assert end.data["usage"]["output_tokens"] == 8
    verified(db_path)


def test_a_per_call_timeout_on_complete_is_recorded(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(text=TEXT))

    async def run() -> str:
        async with make_async() as agw:
            return (await agw.complete("chat", PROMPT, timeout=5)).request_id

    request_id = asyncio.run(run())
    assert events(db_path, request_id)[0].data["timeout_s"] == 5.0


def test_a_scope_that_cancels_at_every_await_still_records_cancelled(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    # anyio's cancel scopes (Starlette's streaming response uses one) cancel again at every
    # await after the first: the cleanup must still write its CANCELLED record.
    import anyio

    fake_api.script(Reply.stream(TEXT, deltas=8, delay=0.1))
    ids: list[str] = []

    async def run() -> None:
        async with make_async() as agw:
            with anyio.move_on_after(0.25):
                async with agw.stream("chat", PROMPT) as s:  # type: ignore[attr-defined]
                    ids.append(s.request_id)
                    async for _event in s:
                        pass

    anyio.run(run)
    end = terminal(db_path, ids[0])
    assert str(end.kind) == "cancelled"
    verified(db_path)
