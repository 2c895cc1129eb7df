"""Fixtures for replay tests: a policy folder copy, a SQLite audit log with a recorded mix."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway import Gateway
from gateway.cli import main
from tests.fakes.messages_api import FakeMessagesAPI, Reply

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
API_KEY = "sk-ant-test-replay-KEY-DO-NOT-LEAK"
JSON_ANSWER = (
    '{"counterparty": "ACME", "amount": 100, "currency": "EUR", "value_date": "2026-12-01"}'
)


@dataclass(frozen=True)
class Recorded:
    url: str
    policy_dir: Path
    base_url: str
    ids: dict[str, str]  # label -> request id


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    target = tmp_path / "policies"
    shutil.copytree(SHIPPED, target)
    return target


@pytest.fixture
def recorded(policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI) -> Iterator[Recorded]:
    """A mix: compliance (text, replay), quant (record), json_extraction, offline_demo (local),
    and a cache hit of the compliance request."""
    fake_api.script(
        Reply.ok(text="Verdict: compliant.\nNo rule breached."),
        Reply.ok(text="Idea: momentum on FX majors."),
        Reply.ok(json_text=JSON_ANSWER),
    )
    with Gateway(
        policy_dir=policy_dir,
        database_url=sqlite_url,
        anthropic_api_key=API_KEY,
        base_url=fake_api.base_url,
        durability="os",
    ) as gw:
        ids = {
            "compliance": gw.complete(
                "compliance_review", "Pay 10 EUR to ACME.", caller="pay"
            ).request_id,
            "quant": gw.complete("quant_strategy", "FX ideas", caller="desk").request_id,
            "json": gw.complete(
                "json_extraction", "Buy 100 EUR from ACME", caller="ops"
            ).request_id,
            "local": gw.complete("offline_demo", "The reviewer reads the").request_id,
            "hit": gw.complete("compliance_review", "Pay 10 EUR to ACME.", caller="pay").request_id,
        }
    yield Recorded(sqlite_url, policy_dir, fake_api.base_url, ids)


@pytest.fixture
def cli(recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    monkeypatch.setenv("GATEWAY_DATABASE_URL", recorded.url)
    monkeypatch.setenv("GATEWAY_POLICY_DIR", str(recorded.policy_dir))
    monkeypatch.setenv("GATEWAY_DURABILITY", "os")
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", recorded.base_url)
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(main, ["replay", *args], catch_exceptions=False)

    return invoke
