"""AsyncGateway records a call's outcome from its event loop: no worker thread waits for a
small answer's RESPONSE or a FAILED, a call cancelled once its answer is in still gets the
answer recorded, and a large answer or one with alerts is recorded in a worker thread."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.engine import Engine
from structlog.testing import capture_logs

from audit import AuditStore
from audit.verify import verify_log
from gateway import AnswerAlertWarning, AsyncGateway, Gateway, UpstreamError
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.gateway.conftest import events, kinds, settings_for

_KINDS = "SELECT kind FROM events WHERE request_id = ? ORDER BY seq"


def _workers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "gateway-audit")


@contextmanager
def _event_inserts(watching: threading.Event) -> Iterator[list[str]]:
    """The name of the thread that runs each INSERT INTO events while ``watching`` is set
    (SQLite's trace callback; the gateway appends events of its own as it opens)."""
    names: list[str] = []

    def traced(statement: str) -> None:
        if watching.is_set() and statement.upper().startswith("INSERT INTO EVENTS"):
            names.append(threading.current_thread().name)

    def connected(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(traced)

    sqlalchemy.event.listen(Engine, "connect", connected)
    try:
        yield names
    finally:
        sqlalchemy.event.remove(Engine, "connect", connected)


def test_a_record_mode_miss_records_its_outcome_with_no_worker_thread(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # Answers and a refusal upstream: each intent and each outcome (RESPONSE, FAILED) joins
    # the store's group commit from the loop; no worker thread is started for them.
    fake_api.script(Reply.ok(), Reply.error(400), Reply.ok(), Reply.ok())
    watching = threading.Event()

    async def run() -> int:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            watching.set()
            await gw.complete("quant_strategy", "ideas 1", caller="research")
            with pytest.raises(UpstreamError):
                await gw.complete("quant_strategy", "ideas 2", caller="research")
            for n in (3, 4):
                await gw.complete("quant_strategy", f"ideas {n}", caller="research")
            return _workers()

    with _event_inserts(watching) as inserts:
        workers = asyncio.run(run())
    assert workers == 0
    assert set(inserts) == {"audit-committer"}
    assert kinds(db_path) == [
        *("request", "response"),
        *("request", "attempt_failed", "failed"),
        *("request", "response") * 2,
    ]
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        assert verify_log(store).ok


def test_a_call_cancelled_once_its_answer_is_in_still_records_its_response(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # Another writer takes the SQLite file as the upstream answers, so the RESPONSE waits
    # to be committed when the caller is cancelled (as a server's request time-out does):
    # the cancellation goes on at once, and the RESPONSE, once begun the call's one outcome
    # (no CANCELLED), is committed when the file is let go, its cache offer and log after it.
    holders: list[sqlite3.Connection] = []
    committing = threading.Event()

    def answer_then_lock(_request: RecordedRequest) -> Reply:
        holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # the intent is committed: the outcome will wait
        holders.append(holder)
        return Reply.ok(text="the answer")

    def traced(statement: str) -> None:  # the RESPONSE's transaction begins (and waits)
        if holders and statement.upper().startswith("BEGIN"):
            committing.set()

    def connected(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(traced)

    fake_api.set_default(answer_then_lock)

    async def run() -> tuple[str, list[str]]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            told: list[str] = []
            call = asyncio.ensure_future(
                gw.complete("compliance_review", "Transaction: 9", on_request_id=told.append)
            )
            assert await asyncio.to_thread(committing.wait, 30)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # The RESPONSE still waits for the file (read beside the writer that holds it).
            reader = sqlite3.connect(db_path)
            meanwhile = [kind for (kind,) in reader.execute(_KINDS, told)]
            reader.close()
            holders[0].execute("ROLLBACK")
            return told[0], meanwhile

    sqlalchemy.event.listen(Engine, "connect", connected)
    try:
        with capture_logs() as logs:
            request_id, meanwhile = asyncio.run(run())  # closing commits what is queued
    finally:
        sqlalchemy.event.remove(Engine, "connect", connected)
        for holder in holders:
            holder.close()
    assert meanwhile == ["request"]
    assert kinds(db_path, request_id) == ["request", "response"]
    completed = [e for e in logs if e["event"] == "request_completed"]
    assert [(e["request_id"], e["cached"]) for e in completed] == [(request_id, False)]


def test_a_large_answer_is_recorded_in_a_worker_thread(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # Past INLINE_WIRE_BYTES, drafting and digesting the answer would hold the loop: a
    # worker thread does it, and the record is the same.
    text = "word " * 60_000  # 300,000 characters
    fake_api.script(Reply.ok(text=text))
    watching = threading.Event()

    async def run() -> str:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            watching.set()
            result = await gw.complete("quant_strategy", "ideas", caller="research")
            return result.text

    with _event_inserts(watching) as inserts:
        assert asyncio.run(run()) == text
    # The intent, then the RESPONSE (SQLite may trace a statement more than once).
    assert list(dict.fromkeys(inserts)) == ["audit-committer", "gateway-audit"]
    assert kinds(db_path) == ["request", "response"]


def test_an_answer_with_alerts_records_each_alert_after_its_response(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # Several appends, each naming the RESPONSE's seq: made together in a worker thread.
    fake_api.script(Reply.ok(model="claude-other-model"))

    async def run() -> tuple[str, ...]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            with pytest.warns(AnswerAlertWarning):
                result = await gw.complete("quant_strategy", "ideas", caller="research")
            return result.alerts

    assert asyncio.run(run()) == ("model",)
    request, response, alert = events(db_path)
    assert [str(e.kind) for e in (request, response, alert)] == [
        "request",
        "response",
        "answer_alert",
    ]
    assert alert.data["response_seq"] == response.seq
    assert response.data["alerts"][0]["check"] == "model"


def test_a_completed_stream_records_its_response_with_no_worker_thread(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.set_default(lambda _request: Reply.ok(text="streamed"))
    watching = threading.Event()

    async def run() -> tuple[str, int]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            watching.set()
            async with gw.stream("quant_strategy", "ideas", caller="research") as s:
                async for _event in s:
                    pass
            return s.result.text, _workers()

    with _event_inserts(watching) as inserts:
        text, workers = asyncio.run(run())
    assert (text, workers) == ("streamed", 0)
    assert set(inserts) == {"audit-committer"}
    assert kinds(db_path) == ["request", "response"]


def test_gateway_and_async_gateway_record_the_same_outcomes(
    policy_dir: Path, tmp_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # The same drafts, appended in the caller's thread or from the loop: the same events,
    # the same data but for what each call measures or is given anew, the same payloads.
    def recorded(db_path: Path) -> list[tuple[str, dict[str, Any], list[str]]]:
        return [
            (str(e.kind), _stable(e.data), sorted(e.payload_digests))
            for e in events(db_path)
            if e.task == "quant_strategy"
        ]

    sync_db, async_db = tmp_path / "sync.db", tmp_path / "async.db"
    fake_api.script(Reply.ok(text="the answer"), Reply.error(400))
    with Gateway(settings_for(policy_dir, sync_db, fake_api.base_url)) as gw:
        gw.complete("quant_strategy", "ideas", caller="research")
        with pytest.raises(UpstreamError):
            gw.complete("quant_strategy", "more ideas", caller="research")

    async def run() -> None:
        async with AsyncGateway(settings_for(policy_dir, async_db, fake_api.base_url)) as agw:
            await agw.complete("quant_strategy", "ideas", caller="research")
            with pytest.raises(UpstreamError):
                await agw.complete("quant_strategy", "more ideas", caller="research")

    fake_api.script(Reply.ok(text="the answer"), Reply.error(400))
    asyncio.run(run())
    recorded_sync, recorded_async = recorded(sync_db), recorded(async_db)
    assert [kind for kind, _, _ in recorded_sync] == [
        *("request", "response"),
        *("request", "attempt_failed", "failed"),
    ]
    assert recorded_async == recorded_sync


def _stable(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without what each call measures or is given anew (its latency, the ids the
    upstream gives it, which the fake numbers in order)."""
    measured = {"latency_ms", "total_ms", "upstream_request_id", "response_id"}
    kept = json.dumps({k: v for k, v in data.items() if k not in measured}, sort_keys=True)
    return dict(json.loads(re.sub(r"req_fake_\d+", "req_fake_N", kept)))
