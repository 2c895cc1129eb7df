"""`gateway serve` on a port another process holds: one line and the configuration exit code.

Before, it printed "gateway serving on ..." and then exited 3, which the exit-code table
defines as "the model provider failed".
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import ServerProcess, server_env

pytestmark = pytest.mark.slow  # `gateway serve` as a process


def test_a_busy_port_is_a_configuration_error_before_anything_says_serving(
    tmp_path: Path, fake: FakeMessagesAPI
) -> None:
    server = ServerProcess(tmp_path, server_env(tmp_path, fake.base_url))
    server.cli("db", "upgrade")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = server.cli("serve", "--port", str(port), check=False)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "serving on" not in done.stderr and "Traceback" not in done.stderr
    assert any(f"cannot listen on 127.0.0.1:{port}" in line for line in lines), lines
    assert "another process is listening there" in done.stderr
