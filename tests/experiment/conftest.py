"""Fixtures for the experiment tests: settings on the shipped policies and a fresh SQLite log."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStore, StoredEvent
from gateway import Settings
from tests.fakes.messages_api import FakeMessagesAPI

SHIPPED = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(policy_dir=SHIPPED, database_url=db_url, durability="os")


@pytest.fixture
def claude_settings(db_url: str, fake_api: FakeMessagesAPI) -> Settings:
    return Settings(
        policy_dir=SHIPPED,
        database_url=db_url,
        durability="os",
        anthropic_api_key="sk-test",
        default_caller="tests",
        anthropic_base_url=fake_api.base_url,
    )


def all_events(db_url: str) -> list[StoredEvent]:
    with AuditStore.open(db_url, durability="os") as store:
        return list(store.iter_events())
