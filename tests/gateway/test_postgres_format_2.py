"""Log format 2 on the request path (real PostgreSQL, the loopback fake upstream).

A gateway started with GATEWAY_AUDIT_FORMAT=2 begins format 2 itself; one started before
the switch follows it (its appends and its cache) without a restart; `gateway audit
integrate --once` (the real command) then links every call, and verify passes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from audit import AuditStore, EventKind
from audit.errors import LogFormatUnsupported
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify import verify_log
from gateway import AsyncGateway, Settings
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import API_KEY, MakeGateway
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

GATEWAY = Path(sys.executable).with_name("gateway")
RECORD_KEY = "46" * 32
INTEGRATOR_KEY = "5f" * 32
TRUST = Trust(
    TrustedKeys.of([Signer.from_text(RECORD_KEY).public_key]),
    integrator=TrustedKeys.of([Signer.from_text(INTEGRATOR_KEY).public_key]),
)


def _integrate_once(url: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_AUDIT_FORMAT": "2",
        "GATEWAY_INTEGRATOR_KEY": INTEGRATOR_KEY,
    }
    cmd = [str(GATEWAY), "audit", "integrate", "--once", "--format", "json"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def _rows(url: str) -> list[tuple[int, str, str, str]]:
    """(seq, event_id, kind, prev_hash) of every row, in seq order."""
    with AuditStore.open(url, create=False) as store, store._backend.reader.connect() as conn:
        return [
            (int(s), str(e), str(k), str(p))
            for s, e, k, p in conn.exec_driver_sql(
                "SELECT seq, event_id, kind, prev_hash FROM events ORDER BY seq"
            )
        ]


def _era(url: str) -> int | None:
    with AuditStore.open(url, create=False) as store:
        return store.sequenced_from


def _each_event_once_and_verified(url: str) -> list[tuple[int, str, str, str]]:
    rows = _rows(url)
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))  # every seq once, no gap
    assert len({r[1] for r in rows}) == len(rows)  # count(*) == count(distinct event_id)
    summary = _integrate_once(url)
    assert summary["head"] == len(rows)
    with AuditStore.open(url, create=False) as store:
        report = verify_log(store, trust=TRUST)
    assert report.ok, report.defects[:3]
    assert report.pending_integration == 0  # all linked
    return rows


def test_a_gateway_started_with_format_2_begins_it_and_records_its_calls_in_it(
    make_gateway: MakeGateway, pg_url: str, fake_api: FakeMessagesAPI
) -> None:
    upgrade(pg_url)
    old = make_gateway(database_url=pg_url, record_key=RECORD_KEY)
    old.complete("compliance_review", "Before: pay 1 CHF", caller="payments-svc")
    assert _era(pg_url) is None

    gw = make_gateway(database_url=pg_url, record_key=RECORD_KEY, audit_format=2)
    assert (
        _era(pg_url) == 3 == gw._core.store.sequenced_from
    )  # after the format-1 REQUEST, RESPONSE
    first = gw.complete("compliance_review", "After: pay 2 CHF", caller="payments-svc")
    again = gw.complete("compliance_review", "After: pay 2 CHF", caller="payments-svc")
    # A second one begins nothing again: the era stays where the first put it.
    second = make_gateway(database_url=pg_url, record_key=RECORD_KEY, audit_format=2)
    assert second._core.store.sequenced_from == 3
    other = second.complete("compliance_review", "After: pay 3 CHF", caller="payments-svc")

    assert (again.cached, again.text) == (True, first.text)  # a pending answer is served
    assert len(fake_api.requests) == 3
    rows = _each_event_once_and_verified(pg_url)
    assert [(r[2], r[3] == "") for r in rows] == [
        (EventKind.REQUEST.value, False),
        (EventKind.RESPONSE.value, False),
        (EventKind.REQUEST.value, True),  # format 2 from here: no prev_hash of its own
        (EventKind.RESPONSE.value, True),
        (EventKind.CACHE_HIT.value, True),
        (EventKind.REQUEST.value, True),
        (EventKind.RESPONSE.value, True),
    ]
    assert other.text and not other.cached


def test_a_gateway_opened_before_the_switch_keeps_serving_8_threads_across_it(
    make_gateway: MakeGateway, pg_url: str, fake_api: FakeMessagesAPI
) -> None:
    upgrade(pg_url)
    gw = make_gateway(database_url=pg_url, record_key=RECORD_KEY)
    assert gw._core.store.sequenced_from is None
    done: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def calls(worker: int) -> None:
        n = 0
        while not stop.is_set() and n < 200:
            prompt = f"Transaction {worker}-{n}: pay {n} CHF"
            try:
                result = gw.complete("compliance_review", prompt, caller="payments-svc")
            except BaseException as exc:  # every failure is the test's finding
                with lock:
                    errors.append(exc)
                return
            with lock:
                done.append(result.request_id)
            n += 1

    def until(count: int) -> None:
        deadline = time.monotonic() + 120
        while len(done) < count and not errors and time.monotonic() < deadline:
            time.sleep(0.01)

    threads = [threading.Thread(target=calls, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    try:
        until(24)
        AuditStore.open(pg_url, log_format=2).close()  # another process's switch
        switched_at = len(done)
        until(switched_at + 48)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors[:1]
    era = _era(pg_url)
    assert era is not None and gw._core.store.sequenced_from == era

    rows = _each_event_once_and_verified(pg_url)
    requests = [r for r in rows if r[2] == EventKind.REQUEST.value]
    responses = [r for r in rows if r[2] == EventKind.RESPONSE.value]
    assert len(requests) == len(responses) == len(done) == len(fake_api.requests)
    assert {r[2] for r in rows} == {EventKind.REQUEST.value, EventKind.RESPONSE.value}
    # Format 1 below the era, format 2 from it on, and calls on both sides of it.
    assert all((r[3] == "") == (r[0] >= era) for r in rows)
    assert 0 < era - 1 < len(rows)
    with AuditStore.open(pg_url, create=False) as store:
        for request_id in done:
            kinds = [e.kind for e in store.events_for_request(request_id)]
            assert kinds == [EventKind.REQUEST, EventKind.RESPONSE]


def test_a_gateway_opened_before_the_switch_serves_an_answer_recorded_in_format_2(
    make_gateway: MakeGateway, pg_url: str, fake_api: FakeMessagesAPI
) -> None:
    upgrade(pg_url)
    old = make_gateway(database_url=pg_url, record_key=RECORD_KEY)
    new = make_gateway(database_url=pg_url, record_key=RECORD_KEY, audit_format=2)
    first = new.complete("compliance_review", "Pay 5 CHF", caller="payments-svc")
    # The old gateway's first touch of the format-2 log is a read: the cache.
    hit = old.complete("compliance_review", "Pay 5 CHF", caller="payments-svc")
    assert (hit.cached, hit.text) == (True, first.text)
    assert len(fake_api.requests) == 1
    rows = _each_event_once_and_verified(pg_url)
    assert [r[2] for r in rows] == [
        EventKind.REQUEST.value,
        EventKind.RESPONSE.value,
        EventKind.CACHE_HIT.value,
    ]


def test_async_gateways_begin_format_2_and_follow_it_with_8_tasks_at_once(
    policy_dir: Path, pg_url: str, fake_api: FakeMessagesAPI
) -> None:
    upgrade(pg_url)

    def settings(audit_format: int) -> Settings:
        return Settings(
            policy_dir=policy_dir,
            database_url=pg_url,
            record_key=RECORD_KEY,
            audit_format=audit_format,
            anthropic_api_key=API_KEY,
            anthropic_base_url=fake_api.base_url,
            default_caller="tests",
            durability="os",
        )

    async def run() -> list[str]:
        async with AsyncGateway(settings(1)) as old:
            before = await old.complete("quant_strategy", "Idea before", caller="research")
            assert _era(pg_url) is None
            async with AsyncGateway(settings(2)) as new:
                assert _era(pg_url) == 3
                calls = [
                    gw.complete("quant_strategy", f"Idea {n}", caller="research")
                    for n, gw in enumerate([old] * 8 + [new] * 2)
                ]
                results = await asyncio.gather(*calls)
        return [before.request_id, *(r.request_id for r in results)]

    ids = asyncio.run(run())
    rows = _each_event_once_and_verified(pg_url)
    assert len(rows) == 2 * len(ids) == 22
    assert all((r[3] == "") == (r[0] >= 3) for r in rows)  # format 2 after the first call


def test_a_role_that_may_not_begin_format_2_is_told_so_in_one_line(
    pg_url: str, postgres_server: PostgresServer
) -> None:
    upgrade(pg_url)
    name = "format2_reviewer"
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {name} LOGIN")
    grant(pg_url, name, read_only=True)
    reviewer = postgres_server.url(pg_url.rsplit("/", 1)[1], name)
    with pytest.raises(LogFormatUnsupported, match="may not begin audit log format 2") as caught:
        AuditStore.open(reviewer, log_format=2)
    assert "\n" not in str(caught.value)
    assert _era(pg_url) is None  # nothing begun
