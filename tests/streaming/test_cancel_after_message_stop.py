"""A caller that leaves after ``message_stop`` had the whole answer: its record is a RESPONSE.

Before, the async stream read the upstream body to its end before it built the reply, so a
cancellation landing between ``message_stop`` and that end (the upstream slow to close its
body, or the caller still holding the last event) interrupted the read and the request was
recorded CANCELLED, although the caller had every event of the answer. The loopback fake
delays the body's end (``tail_delay``) to open that window wide.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway import Gateway
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.streaming.conftest import MakeAsync, kinds, terminal, text_of, verified

TEXT = "alpha bravo charlie delta echo foxtrot"
PROMPT = "Summarise the exposure of desk 7 to EUR rates"
TAIL_S = 3.0  # the upstream's body ends this long after message_stop


def _run(make_async: MakeAsync, consume: Any) -> tuple[str, list[dict[str, Any]]]:
    """Run ``consume(stream, received, stopped)`` in a task; cancel it once message_stop has
    reached it (and a little later, so the cancel lands where it is waiting)."""
    ids: list[str] = []
    received: list[dict[str, Any]] = []

    async def task_body(agw: Any, stopped: asyncio.Event) -> None:
        async with agw.stream("chat", PROMPT) as s:
            ids.append(s.request_id)
            await consume(s, received, stopped)

    async def run() -> None:
        async with make_async() as agw:
            stopped = asyncio.Event()
            task = asyncio.create_task(task_body(agw, stopped))
            await asyncio.wait_for(stopped.wait(), 60)
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(run())
    return ids[0], received


def test_a_cancel_while_the_upstream_body_ends_records_the_whole_answer(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, tail_delay=TAIL_S))

    async def consume(s: Any, received: list[dict[str, Any]], stopped: asyncio.Event) -> None:
        async for event in s:  # after message_stop, the next step waits on the body's end
            received.append(event)
            if event["type"] == "message_stop":
                stopped.set()

    request_id, received = _run(make_async, consume)
    assert received[-1]["type"] == "message_stop" and text_of(received) == TEXT
    end = terminal(db_path, request_id)
    assert str(end.kind) == "response", end.data
    assert kinds(db_path, request_id) == ["request", "response"]
    verified(db_path)


def test_a_cancel_while_the_caller_holds_message_stop_records_the_whole_answer(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, tail_delay=TAIL_S))

    async def consume(s: Any, received: list[dict[str, Any]], stopped: asyncio.Event) -> None:
        async for event in s:
            received.append(event)
            if event["type"] == "message_stop":
                stopped.set()
                await asyncio.Event().wait()  # the caller is busy with the answer: cancelled here

    request_id, received = _run(make_async, consume)
    assert text_of(received) == TEXT
    end = terminal(db_path, request_id)
    assert str(end.kind) == "response", end.data
    verified(db_path)


def test_a_cancel_before_message_stop_still_records_cancelled(
    make_async: MakeAsync, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, delay=0.05, tail_delay=TAIL_S))

    async def consume(s: Any, received: list[dict[str, Any]], stopped: asyncio.Event) -> None:
        async for event in s:
            received.append(event)
            if event["type"] == "message_delta":  # the stop reason, not message_stop yet
                stopped.set()
                await asyncio.Event().wait()

    request_id, _ = _run(make_async, consume)
    end = terminal(db_path, request_id)
    assert str(end.kind) == "cancelled" and end.data["reason"] == "cancelled"


def test_a_blocking_caller_that_leaves_at_message_stop_had_the_whole_answer(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=4, tail_delay=TAIL_S))
    received = []
    with gw.stream("chat", PROMPT) as s:
        for event in s:
            received.append(event)
            if event["type"] == "message_stop":
                break  # the caller has it all, and does not wait for the body's end
    assert text_of(received) == TEXT
    assert str(terminal(db_path, s.request_id).kind) == "response"
    verified(db_path)
