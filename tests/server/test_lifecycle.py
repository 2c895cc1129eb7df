"""`gateway serve` as processes come and go: SIGTERM with requests in flight, two workers on
one SQLite file and on one PostgreSQL database; the log verifies after each."""

from __future__ import annotations

import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess, running_server

pytestmark = pytest.mark.slow  # `gateway serve` as a process


def ask(server: ServerProcess, key: str, n: int) -> str:
    client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
    message = client.messages.create(
        model="quant_strategy",
        max_tokens=256,
        messages=[{"role": "user", "content": f"Idea {n}"}],
    )
    return message.id


def test_sigterm_lets_sixteen_requests_in_flight_finish_and_the_log_verifies(
    tmp_path: Path,
) -> None:
    with FakeMessagesAPI() as fake, running_server(tmp_path, fake) as server:
        key = server.create_key("quant-desk")
        fake.set_default(lambda _request: Reply.slow(0.6, then=Reply.ok()))
        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(ask, server, key, n) for n in range(16)]
            deadline = time.monotonic() + 10
            while len(fake.requests) < 16 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(fake.requests) == 16  # all sixteen are upstream now
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            ids = [f.result(timeout=30) for f in futures]
        # uvicorn re-raises the signal once it has shut down cleanly (exit status -SIGTERM).
        assert server.stop() in (0, -signal.SIGTERM)
        outcomes = Counter(str(e.kind) for e in server.audit_events() if e.request_id in set(ids))
        # (An ATTEMPT_FAILED may precede a response: the fake's accept queue is short.)
        assert outcomes["request"] == outcomes["response"] == 16
        assert outcomes["failed"] == outcomes["cancelled"] == 0
        assert any(e.get("event") == "server_stopped" for e in server.log_events())
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr


def test_two_workers_share_one_sqlite_file(tmp_path: Path) -> None:
    with FakeMessagesAPI() as fake, running_server(tmp_path, fake, "--workers", "2") as server:
        key = server.create_key("quant-desk")

        def started() -> set[object]:
            return {e["pid"] for e in server.log_events() if e.get("event") == "server_started"}

        # Ready means one worker answers; on a busy machine the 48 calls can all be served
        # before the other has started, so both are waited for first.
        deadline = time.monotonic() + 30
        while len(started()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(started()) == 2  # two processes, each with its own store
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda n: ask(server, key, n), range(48)))
        assert len(set(ids)) == 48
        answered = {e["pid"] for e in server.log_events() if e.get("event") == "http_request"}
        assert answered <= started()
        server.stop()
        kinds = Counter(str(e.kind) for e in server.audit_events() if e.request_id in set(ids))
        assert kinds == {"request": 48, "response": 48}
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.postgres
def test_two_workers_share_one_postgresql_database(tmp_path: Path, pg_url: str) -> None:
    # PostgreSQL has no folder to keep a record key beside the log: the gateway is given one.
    env = {"GATEWAY_DATABASE_URL": pg_url, "GATEWAY_RECORD_KEY": "6b" * 32}
    with (
        FakeMessagesAPI() as fake,
        running_server(tmp_path, fake, "--workers", "2", **env) as server,
    ):
        key = server.create_key("quant-desk")
        fake.set_default(lambda _request: Reply.slow(0.02, then=Reply.ok()))
        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(lambda n: ask(server, key, n), range(96)))
        assert len(set(ids)) == 96
        started = {e["pid"] for e in server.log_events() if e.get("event") == "server_started"}
        assert len(started) == 2
        answered = {
            e["pid"]
            for e in server.log_events()
            if e.get("event") == "http_request" and e.get("request_id") in set(ids)
        }
        assert answered == started  # both workers answered, each appending to one chain
        server.stop()
        per_request = Counter(
            (e.request_id, str(e.kind)) for e in server.audit_events() if e.request_id in set(ids)
        )
        assert set(per_request.values()) == {1}  # one REQUEST and one RESPONSE each, once
        assert Counter(kind for _id, kind in per_request) == {"request": 96, "response": 96}
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_request_past_its_time_out_is_a_504_and_recorded_cancelled(tmp_path: Path) -> None:
    with (
        FakeMessagesAPI() as fake,
        running_server(tmp_path, fake, GATEWAY_SERVER_REQUEST_TIMEOUT_S="0.5") as server,
    ):
        key = server.create_key("quant-desk")
        fake.script(Reply.slow(3.0))
        started = time.monotonic()
        client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
        with pytest.raises(anthropic.InternalServerError) as late:
            client.messages.create(
                model="quant_strategy",
                max_tokens=256,
                messages=[{"role": "user", "content": "An idea that takes too long"}],
            )
        assert late.value.status_code == 504 and time.monotonic() - started < 2.5
        assert late.value.body["error"]["type"] == "timeout_error"  # type: ignore[index]
        server.stop()
        calls = [e for e in server.audit_events() if e.task == "quant_strategy"]
        assert [str(e.kind) for e in calls] == ["request", "cancelled"]
        assert calls[0].request_id == calls[1].request_id
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr
