"""Fixtures for the reliability suite: one fork server per module, policy copies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.helpers import ForkServer, copy_policies


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    log = tmp_path_factory.mktemp("fork") / "worker.stderr"
    with ForkServer(log) as server:
        yield server


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    return copy_policies(tmp_path / "policies")
