"""Scenario 2: the audit database fails under the gateway.

Guarantee (reference/audit.md 4): no upstream call without a committed intent, no answer
without a committed outcome, the gateway recovers when the database does, verify passes.
Faults: the SQLite write lock held by another process past ``?lock_timeout=``, a file-size
limit (disk full), a database the process may not write, PostgreSQL stopped and restarted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from audit import AuditStore
from audit.canonical import digest
from gateway import AuditError, AuditWriteError, Gateway, Settings
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.reliability.helpers import ForkServer, copy_policies, log_state, settings_for
from tests.support.postgres import PostgresServer

HOLDER = Path(__file__).with_name("lock_holder.py")
LOCK_CYCLES = 5


class LockHolder:
    """Another process that holds BEGIN IMMEDIATE on ``db`` between acquire and release."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._proc: subprocess.Popen[str] | None = None

    def acquire(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, str(HOLDER), str(self.db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        assert self._proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


def _settings(url: str, fake: FakeMessagesAPI, policy_dir: Path) -> Settings:
    return Settings(**settings_for(url, fake.base_url, policy_dir, default_caller="tests"))


def _assert_log_sound(url: str, fake: FakeMessagesAPI) -> dict[str, str]:
    state = log_state(url)
    assert state.verified, state.defects
    assert {digest(r.body) for r in fake.requests} <= state.intent_bodies
    return state.statuses


@pytest.mark.slow  # a lock-holding process
def test_sqlite_lock_past_the_timeout_fails_closed_then_recovers(
    fake_api: FakeMessagesAPI, policy_dir: Path, tmp_path: Path
) -> None:
    """Lock held at the intent: no upstream call. Held at the outcome: no answer."""
    db = tmp_path / "audit.db"
    url = f"sqlite:///{db}?lock_timeout=0.3"
    lock = LockHolder(db)
    lock_next_call = {"on": False}

    def lock_during_call(_request: RecordedRequest) -> Reply:
        if lock_next_call["on"]:  # the intent is committed; lock before the answer goes back
            lock_next_call["on"] = False
            lock.acquire()
        return Reply.ok()

    fake_api.set_default(lock_during_call)
    refused_intents = refused_outcomes = recovered = 0
    interrupted: list[str] = []
    with Gateway(_settings(url, fake_api, policy_dir)) as gw:
        gw.complete("quant_strategy", "warm up")
        for cycle in range(LOCK_CYCLES):
            calls = len(fake_api.requests)
            started = time.monotonic()
            with lock.held(), pytest.raises(AuditWriteError):
                gw.complete("quant_strategy", f"intent blocked {cycle}")
            waited = time.monotonic() - started
            assert 0.3 <= waited < 5.0
            assert len(fake_api.requests) == calls, "an upstream call without an intent"
            refused_intents += 1

            # The lock is taken while the upstream answers: the outcome cannot be written.
            lock_next_call["on"] = True
            try:
                with pytest.raises(AuditWriteError) as caught:
                    gw.complete("quant_strategy", f"outcome blocked {cycle}")
            finally:
                lock.release()
            assert caught.value.request_id is not None
            interrupted.append(caught.value.request_id)
            refused_outcomes += 1
            assert len(fake_api.requests) == calls + 1

            gw.complete("quant_strategy", f"after the lock {cycle}")  # recovered
            recovered += 1
    statuses = _assert_log_sound(url, fake_api)
    assert [statuses[r] for r in interrupted] == ["incomplete"] * LOCK_CYCLES
    assert refused_outcomes == refused_intents == recovered == LOCK_CYCLES


@pytest.mark.slow  # fills a disk
def test_disk_full_fails_closed_and_the_log_stays_sound(
    fork_server: ForkServer, fake_api: FakeMessagesAPI, policy_dir: Path, tmp_path: Path
) -> None:
    """A gateway process under RLIMIT_FSIZE runs out of file size; nothing half-written."""
    db = tmp_path / "audit.db"
    url = f"sqlite:///{db}"
    AuditStore.open(url).close()  # created and migrated before the limit, as in production
    limit = db.stat().st_size + 768 * 1024
    prompts = [f"{n} " + "portfolio " * 2_000 for n in range(120)]  # ~20 KB each
    records = fork_server.run(
        {
            "name": "diskfull",
            "settings": settings_for(url, fake_api.base_url, policy_dir),
            "task": "quant_strategy",
            "prompts": prompts,
            "fsize_limit": limit,
        }
    )
    acks = [r for r in records if r["event"] == "ack"]
    errors = [r for r in records if r["event"] == "error"]
    assert not [r for r in records if r["event"] == "crash"], records
    assert acks and errors, "the limit was never reached"
    assert {e["error"] for e in errors} == {"AuditWriteError"}
    assert len(acks) + len(errors) == len(prompts)
    statuses = _assert_log_sound(url, fake_api)
    for ack in acks:
        assert statuses[str(ack["request_id"])] == "completed"
    with Gateway(_settings(url, fake_api, policy_dir)) as gw:  # space is back
        gw.complete("quant_strategy", "after the disk was freed")
    assert _assert_log_sound(url, fake_api)
    print(f"disk full: acked={len(acks)} refused={len(errors)} limit={limit}")


@pytest.mark.slow  # a gateway process in a fork server
def test_database_the_process_cannot_write_is_refused_before_any_call(
    fork_server: ForkServer, fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An unprivileged process meets a database it may read but not write: one typed error."""
    # pytest's folders are private to root; this one is readable by the unprivileged user.
    root = Path(tempfile.mkdtemp(prefix="gateway-ro-"))
    os.chmod(root, 0o755)  # noqa: S103  the unprivileged child reads it; nothing secret inside
    policies = copy_policies(root / "policies")
    db = root / "audit.db"
    url = f"sqlite:///{db}"
    with Gateway(_settings(url, fake_api, policies)) as gw:
        gw.complete("quant_strategy", "written while writable")
    before = db.read_bytes()
    calls = len(fake_api.requests)
    records = fork_server.run(
        {
            "name": "readonly",
            "settings": settings_for(url, fake_api.base_url, policies),
            "task": "quant_strategy",
            "prompts": ["must not be sent"] * 3,
            "as_nobody": True,
        }
    )
    assert not [r for r in records if r["event"] in ("crash", "ack")], records
    errors = [r for r in records if r["event"] == "error"]
    assert errors and all(e["error"] in ("AuditUnavailable", "AuditWriteError") for e in errors)
    assert len(fake_api.requests) == calls
    assert db.read_bytes() == before
    _assert_log_sound(url, fake_api)
    shutil.rmtree(root)


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_stopped_mid_run_fails_closed_and_recovers(
    postgres_server: PostgresServer, pg_url: str, fake_api: FakeMessagesAPI, policy_dir: Path
) -> None:
    """Server down at the intent: no call. Down during the call: no answer. Back: works."""
    from audit.store.migrate import upgrade

    upgrade(pg_url)
    stop_during_call = {"on": False}

    def maybe_stop(_request: RecordedRequest) -> Reply:
        if stop_during_call["on"]:
            stop_during_call["on"] = False
            postgres_server.stop()
        return Reply.ok()

    fake_api.set_default(maybe_stop)
    attempts_to_recover: list[int] = []

    def until_it_works(gw: Gateway, prompt: str) -> None:
        for attempt in range(1, 6):
            try:
                gw.complete("quant_strategy", prompt)
            except AuditError:
                continue
            attempts_to_recover.append(attempt)
            return
        raise AssertionError("the gateway did not recover after the database came back")

    with Gateway(_settings(pg_url, fake_api, policy_dir)) as gw:
        gw.complete("quant_strategy", "before")
        calls = len(fake_api.requests)
        postgres_server.stop()
        try:
            with pytest.raises(AuditError):
                gw.complete("quant_strategy", "while the server is down")
            assert len(fake_api.requests) == calls, "an upstream call without an intent"
        finally:
            postgres_server.start()
        until_it_works(gw, "after the restart")

        stop_during_call["on"] = True
        try:
            with pytest.raises(AuditWriteError) as caught:
                gw.complete("quant_strategy", "server stops while upstream answers")
        finally:
            postgres_server.start()
        until_it_works(gw, "after the second restart")
    statuses = _assert_log_sound(pg_url, fake_api)
    assert statuses[str(caught.value.request_id)] == "incomplete"
    assert all(a <= 2 for a in attempts_to_recover), attempts_to_recover
