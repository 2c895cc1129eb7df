"""Fixtures for the gateway tests: a policy folder, a gateway wired to the loopback fake."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore, StoredEvent
from gateway import Gateway, Settings
from tests.fakes.messages_api import FakeMessagesAPI

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
API_KEY = "sk-ant-test-KEY-7f3e9c1d2b8a-DO-NOT-LEAK"

MakeGateway = Callable[..., Gateway]


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    """A copy of the shipped policies that a test may edit."""
    target = tmp_path / "policies"
    shutil.copytree(SHIPPED, target)
    return target


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"


def settings_for(policy_dir: Path, db_path: Path, base_url: str, /, **changes: Any) -> Settings:
    """A test gateway's settings: the policy folder, a SQLite log at ``db_path``, the fake
    upstream at ``base_url``; ``changes`` set or override any of them."""
    values: dict[str, Any] = {
        "policy_dir": policy_dir,
        "database_url": f"sqlite:///{db_path}",
        "anthropic_api_key": API_KEY,
        "anthropic_base_url": base_url,
        "durability": "os",
        "retry_backoff_base_s": 0.01,
        # Requests to Claude must name a caller; tests that do not are one service.
        "default_caller": "tests",
    }
    values.update(changes)
    return Settings(**values)


@pytest.fixture
def make_gateway(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> Iterator[MakeGateway]:
    """Build gateways on the test's policy folder, database and fake; all closed afterwards."""
    made: list[Gateway] = []

    def make(**changes: Any) -> Gateway:
        offline = changes.pop("offline", False)
        providers = changes.pop("providers", None)
        settings = settings_for(policy_dir, db_path, fake_api.base_url, **changes)
        gateway = Gateway(settings, offline=offline, providers=providers)
        made.append(gateway)
        return gateway

    yield make
    for gateway in made:
        gateway.close()


@pytest.fixture
def gw(make_gateway: MakeGateway) -> Gateway:
    return make_gateway()


def events(db_path: Path) -> list[StoredEvent]:
    """Every event in the log, read through a separate store."""
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        return list(store.iter_events())


def payload_text(db_path: Path, event: StoredEvent, name: str) -> str:
    """A named payload of ``event``, as text (an upstream's words, kept as content)."""
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        return store.payload(event.payload_digests[name]).decode()


def kinds(db_path: Path, request_id: str | None = None) -> list[str]:
    return [
        str(e.kind) for e in events(db_path) if request_id is None or e.request_id == request_id
    ]
