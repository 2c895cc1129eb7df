"""SIGTERM catching a stream after its last event went out: the client has the whole
answer, so the stream ends as it would have, never with an error after it (an SDK would
raise it and send the request again), and the log holds the completed answer.

The window is made wide on purpose: another writer holds the SQLite file as the stream
ends, so its RESPONSE append waits after ``message_stop`` went out, past the drain time,
where the shutdown cancels it; the append completes once the file is let go."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess, running_server

pytestmark = pytest.mark.slow  # `gateway serve` as a process


def read_stream(
    server: ServerProcess, key: str, first: threading.Event, stopped: threading.Event
) -> tuple[str, list[str]]:
    """The stream's request id and its events' types, as a client reads them."""
    seen: list[str] = []
    body = {
        "model": "compliance_review",
        "max_tokens": 512,
        "stream": True,
        "messages": [{"role": "user", "content": "Transaction 7: 10 GBP to Hooli"}],
    }
    with (
        httpx.Client(timeout=60) as client,
        client.stream(
            "POST", f"{server.base_url}/v1/messages", json=body, headers={"x-api-key": key}
        ) as answer,
    ):
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:])["type"])
                if seen[-1] == "content_block_delta":
                    first.set()
                if seen[-1] == "message_stop":
                    stopped.set()
        return answer.headers["request-id"], seen


def test_a_stream_whose_answer_went_out_is_not_followed_by_an_error(tmp_path: Path) -> None:
    with (
        FakeMessagesAPI() as fake,
        running_server(tmp_path, fake, GATEWAY_SERVER_SHUTDOWN_GRACE_S="1") as server,
    ):
        key = server.create_key("trading-desk")
        fake.set_default(lambda _request: Reply.stream("word " * 6, deltas=6, delay=0.1))
        first, stopped = threading.Event(), threading.Event()
        other_writer = sqlite3.connect(server.db_path, isolation_level=None, timeout=30)
        try:
            with ThreadPoolExecutor(1) as pool:
                reading = pool.submit(read_stream, server, key, first, stopped)
                assert first.wait(30)  # its REQUEST is committed: streaming has begun
                other_writer.execute("BEGIN IMMEDIATE")  # the RESPONSE append will wait
                assert stopped.wait(30)  # the whole answer is with the client
                assert server.proc is not None
                server.proc.send_signal(signal.SIGTERM)  # cancelled after the 1 s drain
                request_id, seen = reading.result(timeout=60)
            other_writer.execute("ROLLBACK")
        finally:
            other_writer.close()
        assert server.stop() in (0, -signal.SIGTERM)
        assert seen[-1] == "message_stop" and "error" not in seen, seen
        kinds = [str(e.kind) for e in server.audit_events() if e.request_id == request_id]
        assert kinds == ["request", "response"], kinds
        assert "Traceback" not in server.log_path.read_text()
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr
