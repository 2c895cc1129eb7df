"""The request time-out catching a stream after its last event went out: the client has the
whole answer, so the stream ends as it would have, never with a ``timeout_error`` after it
(an SDK would raise it and send the request again), and the log holds the completed answer.

The window is made wide on purpose, as in test_shutdown_completed_streams: another writer
holds the SQLite file as the stream ends, so its RESPONSE append waits after
``message_stop`` went out, past the request's deadline; it completes once the file is let
go."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess, server_env
from tests.server.test_shutdown_completed_streams import read_stream

pytestmark = pytest.mark.slow  # `gateway serve` as a process


def test_a_stream_whose_answer_went_out_gets_no_timeout_error_after_it(tmp_path: Path) -> None:
    with FakeMessagesAPI() as fake:
        server = ServerProcess(
            tmp_path, server_env(tmp_path, fake.base_url, GATEWAY_SERVER_REQUEST_TIMEOUT_S="5")
        )
        server.cli("db", "upgrade")
        server.start(ready_within=120)  # a busy host takes a while to import the server
        try:
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
                    request_id, seen = reading.result(timeout=60)  # ends at the deadline
                other_writer.execute("ROLLBACK")
            finally:
                other_writer.close()
        finally:
            server.stop()
        assert seen[-1] == "message_stop" and "error" not in seen, seen
        kinds = [str(e.kind) for e in server.audit_events() if e.request_id == request_id]
        assert kinds == ["request", "response"], kinds
