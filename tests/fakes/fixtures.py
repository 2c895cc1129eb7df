"""Pytest fixtures for the loopback fakes (registered in tests/conftest.py).

def test_something(fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.error(529))
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI


@pytest.fixture
def fake_api() -> Iterator[FakeMessagesAPI]:
    """A fresh fake per test, listening on a free loopback port."""
    with FakeMessagesAPI() as fake:
        yield fake


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only the static test key for botocore's standard chain (tests/fakes/cloud_auth.py)."""
    # Imported here: cloud_auth imports the SDK (about a second), which most tests never need.
    from tests.fakes.cloud_auth import BEARER_TOKEN_VARIABLE, aws_test_environment

    for name, value in aws_test_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(BEARER_TOKEN_VARIABLE, raising=False)
