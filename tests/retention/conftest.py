"""Fixtures for retention, legal hold and erasure: gateways on a policy folder whose
compliance_review keeps content 30 days, and the facades over the same database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway import Settings
from gateway.evidence import Erasing
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import API_KEY, MakeGateway, gw, make_gateway, policy_dir

__all__ = ["gw", "make_gateway", "policy_dir"]

LATER = datetime.now(UTC) + timedelta(days=31)  # past compliance_review's 30 days


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "audit.db"


@pytest.fixture(autouse=True)
def _thirty_days(policy_dir: Path) -> None:
    policy = policy_dir / "compliance_review.toml"
    policy.write_text(
        policy.read_text(encoding="utf-8") + '\n[retention]\ncontent_days = 30\nname = "30d"\n',
        encoding="utf-8",
    )


@pytest.fixture
def settings(policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI) -> Settings:
    return Settings(
        policy_dir=policy_dir,
        database_url=f"sqlite:///{db_path}",
        anthropic_api_key=API_KEY,
        anthropic_base_url=fake_api.base_url,
        durability="os",
        default_caller="tests",
    )


@pytest.fixture
def erasing(settings: Settings, make_gateway: MakeGateway) -> Iterator[Erasing]:
    make_gateway().close()  # the database exists and is migrated
    with Erasing.open(settings) as facade:
        yield facade
