"""AsyncGateway cancelled while its intent is being committed (the provider has built the
request and waits for the recorder before sending): nothing is sent, and the intent, once
committed, gets its CANCELLED outcome; the log verifies."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.engine import Engine

from gateway import AsyncGateway, Settings
from tests.fakes.messages_api import FakeMessagesAPI
from tests.reliability.helpers import log_state, settings_for
from tests.reliability.test_db_faults import LockHolder

pytestmark = pytest.mark.slow  # a lock-holding process


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
def test_cancelled_while_the_intent_waits_for_the_write_lock(
    fake_api: FakeMessagesAPI, policy_dir: Path, tmp_path: Path, streamed: bool
) -> None:
    db = tmp_path / "audit.db"
    url = f"sqlite:///{db}?lock_timeout=20"
    lock = LockHolder(db)
    told: list[str] = []
    # SQLite names each statement as it starts (its trace callback): the intent's BEGIN
    # IMMEDIATE started after the lock was taken is a commit waiting for that lock.
    lock_taken, intent_waits = threading.Event(), threading.Event()

    def traced(statement: str) -> None:
        if lock_taken.is_set() and statement.startswith("BEGIN IMMEDIATE"):
            intent_waits.set()

    def connected(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(traced)

    async def call(gw: AsyncGateway) -> None:
        if not streamed:
            await gw.complete("quant_strategy", "cancel me", on_request_id=told.append)
            return
        async with gw.stream("quant_strategy", "cancel me", on_request_id=told.append) as s:
            async for _event in s:
                pass

    async def run() -> None:
        settings = Settings(
            **settings_for(url, fake_api.base_url, policy_dir, default_caller="tests")
        )
        async with AsyncGateway(settings) as gw:
            await gw.complete("quant_strategy", "warm up", caller="tests")
            lock.acquire()
            lock_taken.set()
            try:
                task = asyncio.create_task(call(gw))
                # planned, built, and waiting on the REQUEST's commit
                assert await asyncio.to_thread(intent_waits.wait, 30)
                assert len(fake_api.requests) == 1  # the warm-up only
                task.cancel()
                await asyncio.wait({task}, timeout=0.2)
                assert not task.done()  # the commit cannot be stopped, so it is waited for
            finally:
                lock.release()
            with pytest.raises(asyncio.CancelledError):
                await task

    sqlalchemy.event.listen(Engine, "connect", connected)
    try:
        asyncio.run(run())
    finally:
        sqlalchemy.event.remove(Engine, "connect", connected)
    assert len(fake_api.requests) == 1, "sent after the call was cancelled"
    [request_id] = told
    state = log_state(url)
    assert state.verified, state.defects
    assert state.statuses[request_id] == "cancelled"
