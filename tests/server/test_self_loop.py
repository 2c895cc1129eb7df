"""`gateway serve` refuses to start when its upstream is itself: the upstream URL is the
address it would listen on, or the upstream key is one of its caller keys. Nothing is said
as serving, the exit code is 2 (configuration) and the line names the setting to fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import ServerProcess, free_port, server_env

# Starts processes (gateway serve, fresh interpreters): outside the fast loop.
pytestmark = pytest.mark.slow


def _serve(server: ServerProcess, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(port)],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=server.home,
    )


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_an_upstream_url_that_is_the_gateway_itself_is_refused_at_start(
    tmp_path: Path, fake: FakeMessagesAPI, host: str
) -> None:
    port = free_port()
    upstream = f"http://{host}:{port}"
    server = ServerProcess(tmp_path, server_env(tmp_path, upstream))
    server.cli("db", "upgrade")
    done = _serve(server, port)
    assert done.returncode == 2, done.stderr
    assert f"ANTHROPIC_BASE_URL={upstream}" in done.stderr
    assert "serving on" not in done.stderr and "Traceback" not in done.stderr


def test_a_caller_key_as_the_upstream_key_is_refused_at_start(
    tmp_path: Path, fake: FakeMessagesAPI
) -> None:
    server = ServerProcess(tmp_path, server_env(tmp_path, fake.base_url))
    server.cli("db", "upgrade")
    key = server.create_key("payments-svc")
    server.env["ANTHROPIC_API_KEY"] = key
    before = len(fake.requests)
    done = _serve(server, free_port())
    assert done.returncode == 2, done.stderr
    assert "ANTHROPIC_API_KEY is one of this gateway's caller keys" in done.stderr
    assert key not in done.stderr and "serving on" not in done.stderr
    assert len(fake.requests) == before
