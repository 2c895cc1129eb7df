"""AsyncGateway records exactly what Gateway records, and shares one instance across tasks."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.engine import Engine

from gateway import AsyncGateway, Settings
from gateway.request import AuditThreads
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import kinds, settings_for


def test_async_complete_records_request_and_response(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    async def run() -> None:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            fake_api.script(Reply.error(503), Reply.ok(text="async answer"))
            result = await gw.complete("quant_strategy", "ideas", caller="research")
            assert result.text == "async answer"
            assert kinds(db_path, result.request_id) == ["request", "attempt_failed", "response"]

    asyncio.run(run())


def test_async_concurrent_identical_replay_requests_make_one_call(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.set_default(lambda request: Reply.slow(0.2, then=Reply.ok()))

    async def run() -> list[bool]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            results = await asyncio.gather(
                *[gw.complete("compliance_review", "Transaction: 5") for _ in range(6)]
            )
            return [r.cached for r in results]

    cached = asyncio.run(run())
    assert sorted(cached) == [False] + [True] * 5
    assert len(fake_api.requests) == 1


def test_async_local_model_runs_offline(policy_dir: Path, db_path: Path) -> None:
    async def run() -> str:
        settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
        async with AsyncGateway(settings) as gw:
            result = await gw.complete("offline_demo", "The reviewer")
            return result.model

    assert asyncio.run(run()) == "local:ngram"


def test_audit_reads_and_writes_never_run_on_the_event_loop_thread(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # A failed attempt, a record-mode miss, a replay miss then hit, a stream, a cancellation:
    # every append and lookup of the audit store happens in a worker thread. SQLite tells which
    # thread runs each statement (its trace callback), from when the gateway is open.
    fake_api.set_default(lambda _request: Reply.ok(text="answer"))
    where: list[tuple[str, int]] = []
    watching = threading.Event()

    def traced(statement: str) -> None:
        if watching.is_set():
            where.append((statement.split(None, 1)[0].upper(), threading.get_ident()))

    def connected(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(traced)

    async def run() -> int:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            watching.set()
            fake_api.script(Reply.error(503), Reply.ok(text="after a retry"))
            await gw.complete("quant_strategy", "ideas", caller="research")
            await gw.complete("compliance_review", "Transaction: 7")
            await gw.complete("compliance_review", "Transaction: 7")
            async with gw.stream("quant_strategy", "ideas", caller="research") as s:
                async for _event in s:
                    pass
            fake_api.script(Reply.slow(2.0))
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(gw.complete("quant_strategy", "x", caller="r"), 0.2)
            watching.clear()
            return threading.get_ident()

    sqlalchemy.event.listen(Engine, "connect", connected)
    try:
        loop_thread = asyncio.run(run())
    finally:
        sqlalchemy.event.remove(Engine, "connect", connected)
    assert {"INSERT", "SELECT"} <= {statement for statement, _ in where}  # appends, lookups
    assert all(thread != loop_thread for _, thread in where), where
    assert kinds(db_path)[-1] == "cancelled"


def test_one_call_at_a_time_is_served_by_one_warm_worker_thread(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # The most recently idle thread takes the next job: sequential calls do not rotate
    # through (and wake) a pool of cold threads. The miss's intent and outcome are committed
    # by the store's one committer thread (no worker thread waits for them); each replay
    # hit (its lookup and CACHE_HIT, one hop) by one worker.
    fake_api.set_default(lambda _request: Reply.ok())
    threads: set[tuple[int, str]] = set()
    watching = threading.Event()

    def traced(statement: str) -> None:  # SQLite names each statement as it starts
        if watching.is_set() and statement.upper().startswith("INSERT INTO EVENTS"):
            threads.add((threading.get_ident(), threading.current_thread().name))

    def connected(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(traced)

    async def run() -> None:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            watching.set()
            for _ in range(8):
                await gw.complete("compliance_review", "Transaction: 8")
            watching.clear()

    sqlalchemy.event.listen(Engine, "connect", connected)
    try:
        asyncio.run(run())
    finally:
        sqlalchemy.event.remove(Engine, "connect", connected)
    assert kinds(db_path) == ["request", "response"] + ["cache_hit"] * 7
    assert sorted(name for _, name in threads) == ["audit-committer", "gateway-audit"]


def test_a_claude_stream_is_planned_on_the_loop_beside_a_local_model_policy(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # The shipped policies include offline_demo (the local model, whose version finding it may
    # load the model): only its requests are planned in a worker thread. A Claude task's stream
    # reaches its first event with no worker thread woken on the way (its intent is committed
    # by the store's committer thread); the local model's request is still planned in one.
    fake_api.set_default(lambda _request: Reply.ok(text="streamed"))

    def workers() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "gateway-audit")

    async def run() -> tuple[int, int, str]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            async with gw.stream("quant_strategy", "ideas", caller="research") as s:
                at_first_event = workers()
                async for _event in s:
                    pass
            local = await gw.complete("offline_demo", "The reviewer")
            return at_first_event, workers(), local.model

    assert workers() == 0
    at_first_event, after, model = asyncio.run(run())
    assert at_first_event == 0
    assert after >= 1  # the local request's planning ran in one
    assert model == "local:ngram"
    assert kinds(db_path).count("response") == 2


# -- the worker threads themselves (gateway.request) ---------------------------------------

REQUEST_TAG: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_TAG", default="")


def test_a_job_returns_its_result_raises_its_error_and_sees_the_callers_context() -> None:
    def fail() -> None:
        raise ValueError("no")

    async def run() -> None:
        threads = AuditThreads()
        try:
            REQUEST_TAG.set("req_1")
            assert await threads.submit(REQUEST_TAG.get) == "req_1"
            assert await threads.submit(threading.get_ident) != threading.get_ident()
            with pytest.raises(ValueError, match="no"):
                await threads.submit(fail)
        finally:
            threads.close()

    asyncio.run(run())


def test_a_cancelled_waiter_leaves_the_work_running_and_can_wait_for_it_again() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow_write() -> str:
        started.set()
        release.wait(5)
        finished.append("written")
        return "seq 7"

    async def run() -> str:
        threads = AuditThreads()
        try:
            job = threads.submit(slow_write)
            waiter = asyncio.ensure_future(_await(job))
            await asyncio.to_thread(started.wait, 5)  # the waiter is waiting, the work runs
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert not job.done and not finished
            release.set()
            settling = asyncio.ensure_future(job.settled())
            await asyncio.sleep(0)  # one loop turn: settled() is waiting now
            settling.cancel()  # cancelled again: settled() still waits for the work
            await settling  # and returns once the work has ended
            await job.settled()
            return job.result()
        finally:
            threads.close()

    assert asyncio.run(run()) == "seq 7"
    assert finished == ["written"]


async def _await(job: Any) -> Any:
    return await job


def test_more_jobs_than_threads_wait_in_order_and_close_waits_for_them() -> None:
    done: list[int] = []

    def write(n: int) -> int:
        time.sleep(0.01)
        done.append(n)
        return n

    async def run() -> list[int]:
        threads = AuditThreads(max_threads=2)
        jobs = [threads.submit(write, n) for n in range(6)]
        results = [await job for job in jobs[:2]]
        threads.close()  # the four still queued or running are finished first
        assert sorted(done) == list(range(6))
        with pytest.raises(RuntimeError, match="closed"):
            threads.submit(write, 9)
        return results

    assert asyncio.run(run()) == [0, 1]


def test_calls_waiting_for_their_intents_commit_hold_no_thread_each(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # 16 calls in flight whose intents wait for the chain lock (held by another writer) wait
    # in the store's commit queue, not each in a worker thread of its own: the loop hands
    # them to the store's one committer thread and is answered when each is durable.
    from tests.audit.test_group_commit import ChainLockHolder

    fake_api.set_default(lambda _request: Reply.ok())

    async def run() -> tuple[int, int]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            await gw.complete("quant_strategy", "warm-up", caller="research")
            committer = gw._core.store._committer
            pool = gw._core.recorder.threads

            def busy() -> int:  # worker threads at work (the others wait, idle, for a job)
                with pool._lock:
                    return len(pool._threads) - len(pool._idle)

            before = busy()
            with ChainLockHolder(f"sqlite:///{db_path}"):
                calls = [
                    asyncio.create_task(gw.complete("quant_strategy", f"q{n}", caller="r"))
                    for n in range(16)
                ]
                deadline = time.monotonic() + 30
                while committer.waiting() < 16:  # some at the lock, the others behind
                    assert time.monotonic() < deadline, "the intents never queued"
                    await asyncio.sleep(0.005)
                waiting = busy()
            results = await asyncio.gather(*calls)
            assert len({r.request_id for r in results}) == 16
            return before, waiting

    before, waiting = asyncio.run(run())
    assert waiting <= before  # before: one busy worker thread per waiting call (16)
    assert kinds(db_path).count("response") == 17
