"""Pytest fixtures for the loopback Messages API fake (registered in tests/conftest.py).

def test_something(fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.error(529))
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.messages_api import FakeMessagesAPI


@pytest.fixture
def fake_api() -> Iterator[FakeMessagesAPI]:
    """A fresh fake per test, listening on a free loopback port."""
    with FakeMessagesAPI() as fake:
        yield fake
