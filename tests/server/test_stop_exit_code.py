"""SIGTERM ends `gateway serve` with the same exit code, 0, with one worker or several
(uvicorn's single-process server raised the signal again and exited 143)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import ServerProcess, server_env


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_exits_0_with_any_number_of_workers(
    tmp_path: Path, fake: FakeMessagesAPI, workers: str
) -> None:
    server = ServerProcess(tmp_path, server_env(tmp_path, fake.base_url))
    server.cli("db", "upgrade")
    server.start("--workers", workers, ready_within=120)
    assert server.stop(signal.SIGTERM, timeout=120) == 0
