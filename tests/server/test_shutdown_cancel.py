"""SIGTERM while a plain (non-streamed) request is still waiting on a slow upstream past the
drain time: the request is recorded CANCELLED, the log verifies, and the shutdown says so in
one line (what was cancelled, how many), with no traceback on stderr."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx2 as httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess, running_server

pytestmark = pytest.mark.slow  # `gateway serve` as a process

REQUESTS = 3


def ask(server: ServerProcess, key: str, n: int) -> str:
    """How the request ended for the client: ``done``, the error status, or the error's
    class name."""
    client = anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)
    try:
        client.messages.create(
            model="compliance_review",
            max_tokens=512,
            messages=[{"role": "user", "content": f"Transaction {n}: 10 GBP to Hooli"}],
        )
        return "done"
    except anthropic.APIStatusError as exc:
        return str(exc.status_code)
    except (anthropic.APIError, httpx.HTTPError) as exc:
        return type(exc).__name__


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_past_the_drain_time_cancels_in_one_line_without_a_traceback(
    tmp_path: Path, workers: str
) -> None:
    with (
        FakeMessagesAPI() as fake,
        running_server(
            tmp_path, fake, "--workers", workers, GATEWAY_SERVER_SHUTDOWN_GRACE_S="1"
        ) as server,
    ):
        key = server.create_key("trading-desk")
        fake.set_default(lambda _request: Reply.slow(30.0))
        with ThreadPoolExecutor(REQUESTS) as pool:
            futures = [pool.submit(ask, server, key, n) for n in range(REQUESTS)]
            deadline = time.monotonic() + 15
            while len(fake.requests) < REQUESTS and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(fake.requests) == REQUESTS  # each is waiting on the upstream
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            ended = [f.result(timeout=60) for f in futures]
        assert server.stop() in (0, -signal.SIGTERM)
        # Each caller was answered (503: the SDKs retry it, elsewhere), not dropped.
        assert ended == ["503"] * REQUESTS, ended
        stderr = server.log_path.read_text()
        assert "Traceback" not in stderr, stderr
        assert "CancelledError" not in stderr, stderr
        per_request: dict[str, list[str]] = {}
        for event in server.audit_events():
            if event.task == "compliance_review":
                per_request.setdefault(event.request_id, []).append(str(event.kind))
        assert len(per_request) == REQUESTS
        assert all(kinds == ["request", "cancelled"] for kinds in per_request.values()), per_request
        # One line per worker process that cut requests off, with its count.
        said = [e for e in server.log_events() if e.get("event") == "server_requests_cancelled"]
        assert 1 <= len(said) <= int(workers), stderr
        assert sum(int(str(e["cancelled"])) for e in said) == REQUESTS, said
        done = server.verify()
        assert done.returncode == 0, done.stdout + done.stderr
