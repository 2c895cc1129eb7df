"""SIGTERM while streams are in flight: each stream either finishes within the drain time or
is recorded CANCELLED before the process exits, and the log verifies with every request
having its outcome."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx2 as httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess, running_server

pytestmark = pytest.mark.slow  # `gateway serve` as a process

STREAMS = 8


def stream_one(
    server: ServerProcess, key: str, n: int, opened: threading.Semaphore | None = None
) -> tuple[str, str]:
    """The stream's request id and how it ended for the client (``done`` or the error);
    ``opened`` is released once the stream's first event has arrived."""
    client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
    request_id = ""
    try:
        with client.messages.stream(
            model="compliance_review",
            max_tokens=512,
            messages=[{"role": "user", "content": f"Transaction {n}: 10 GBP to Hooli"}],
        ) as stream:
            request_id = stream.response.headers["request-id"]
            for number, _ in enumerate(stream.text_stream):
                if number == 0 and opened is not None:
                    opened.release()
        return request_id, "done"
    except (anthropic.APIError, httpx.HTTPError) as exc:  # cut off mid-stream
        return request_id, type(exc).__name__


def run_sigterm_mid_stream(tmp_path: Path, *, grace_s: str, stream_s: float) -> None:
    deltas = 20
    with (
        FakeMessagesAPI() as fake,
        running_server(tmp_path, fake, GATEWAY_SERVER_SHUTDOWN_GRACE_S=grace_s) as server,
    ):
        key = server.create_key("trading-desk")
        fake.set_default(
            lambda _request: Reply.stream("word " * deltas, deltas=deltas, delay=stream_s / deltas)
        )
        opened = threading.Semaphore(0)
        with ThreadPoolExecutor(STREAMS) as pool:
            futures = [pool.submit(stream_one, server, key, n, opened) for n in range(STREAMS)]
            deadline = time.monotonic() + 30
            for _ in range(STREAMS):  # a delta into each: all eight are streaming now
                assert opened.acquire(timeout=max(0.0, deadline - time.monotonic()))
            assert len(fake.requests) == STREAMS
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            ended = [f.result(timeout=60) for f in futures]
        assert server.stop() in (0, -signal.SIGTERM)
        ids = {request_id for request_id, _how in ended}
        assert len(ids) == STREAMS and "" not in ids
        per_request: dict[str, list[str]] = {}
        for event in server.audit_events():
            if event.request_id in ids:
                per_request.setdefault(event.request_id, []).append(str(event.kind))
        outcomes = Counter(kinds[-1] for kinds in per_request.values())
        assert len(per_request) == STREAMS
        assert all(kinds[0] == "request" and len(kinds) == 2 for kinds in per_request.values()), (
            per_request
        )
        assert set(outcomes) <= {"response", "cancelled"}, outcomes
        # A client whose stream finished saw it finish; one cut off saw an error.
        for request_id, how in ended:
            assert (per_request[request_id][-1] == "response") == (how == "done"), (how, outcomes)
        assert any(e.get("event") == "server_stopped" for e in server.log_events())
        stderr = server.log_path.read_text()
        assert "Traceback" not in stderr, stderr  # a stream cut off at shutdown is one line
        cancelled = sum(1 for how in outcomes.elements() if how == "cancelled")
        said = [e for e in server.log_events() if e.get("event") == "server_requests_cancelled"]
        assert [e["cancelled"] for e in said] == ([cancelled] if cancelled else []), said
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr


def test_sigterm_lets_eight_streams_finish_within_the_drain_time(tmp_path: Path) -> None:
    run_sigterm_mid_stream(tmp_path, grace_s="20", stream_s=2.0)


def test_sigterm_records_streams_cut_off_after_the_drain_time_cancelled(tmp_path: Path) -> None:
    run_sigterm_mid_stream(tmp_path, grace_s="1", stream_s=8.0)


def test_sigterm_waits_for_streams_whose_intent_is_still_being_written(tmp_path: Path) -> None:
    """Another writer holds the SQLite file at shutdown, so the streams' REQUEST appends wait
    past the drain time; each is cancelled there, and the gateway must stay open until its
    CANCELLED is written after the REQUEST (closed earlier, the outcome is refused and the
    request is left incomplete)."""
    with (
        FakeMessagesAPI() as fake,
        running_server(tmp_path, fake, GATEWAY_SERVER_SHUTDOWN_GRACE_S="1") as server,
    ):
        key = server.create_key("trading-desk")
        fake.set_default(lambda _request: Reply.stream("word " * 10, deltas=10, delay=0.5))
        other_writer = sqlite3.connect(server.db_path, isolation_level=None, timeout=30)
        other_writer.execute("BEGIN IMMEDIATE")  # the write lock, as another process holds it
        try:
            with ThreadPoolExecutor(STREAMS) as pool:
                futures = [pool.submit(stream_one, server, key, n) for n in range(STREAMS)]
                time.sleep(1.0)  # each request is planned and waits to append its intent
                assert server.proc is not None
                server.proc.send_signal(signal.SIGTERM)
                # Past the drain time: uvicorn has cancelled them, the gateway waits for them.
                deadline = time.monotonic() + 30
                while not any(e.get("event") == "server_draining" for e in server.log_events()):
                    assert time.monotonic() < deadline, server.log_path.read_text()
                    time.sleep(0.05)
                other_writer.execute("ROLLBACK")
                ended = [f.result(timeout=60) for f in futures]
        finally:
            other_writer.close()
        assert server.stop() in (0, -signal.SIGTERM)
        assert len(fake.requests) == 0 and {how for _id, how in ended} != {"done"}
        per_request: dict[str, list[str]] = {}
        for event in server.audit_events():
            if event.task == "compliance_review":
                per_request.setdefault(event.request_id, []).append(str(event.kind))
        # Those still looking for a replay (the gateway's audit threads are fewer than eight)
        # were cancelled before writing anything: nothing was sent, nothing is owed.
        assert 1 <= len(per_request) <= STREAMS
        assert all(kinds == ["request", "cancelled"] for kinds in per_request.values()), per_request
        stderr = server.log_path.read_text()
        assert "Traceback" not in stderr, stderr
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr
