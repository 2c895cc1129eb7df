"""AsyncGateway records exactly what Gateway records, and shares one instance across tasks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway import AsyncGateway, Settings
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import API_KEY, kinds


def _settings(policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI) -> Settings:
    return Settings(
        policy_dir=policy_dir,
        database_url=f"sqlite:///{db_path}",
        anthropic_api_key=API_KEY,
        default_caller="tests",
        anthropic_base_url=fake_api.base_url,
        durability="os",
        retry_backoff_base_s=0.01,
    )


def test_async_complete_records_request_and_response(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    async def run() -> None:
        async with AsyncGateway(_settings(policy_dir, db_path, fake_api)) as gw:
            fake_api.script(Reply.error(503), Reply.ok(text="async answer"))
            result = await gw.complete("quant_strategy", "ideas", caller="research")
            assert result.text == "async answer"
            assert kinds(db_path, result.request_id) == ["request", "attempt_failed", "response"]

    asyncio.run(run())


def test_async_concurrent_identical_replay_requests_make_one_call(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.set_default(lambda request: Reply.slow(0.2, then=Reply.ok()))

    async def run() -> list[bool]:
        async with AsyncGateway(_settings(policy_dir, db_path, fake_api)) as gw:
            results = await asyncio.gather(
                *[gw.complete("compliance_review", "Transaction: 5") for _ in range(6)]
            )
            return [r.cached for r in results]

    cached = asyncio.run(run())
    assert sorted(cached) == [False] + [True] * 5
    assert len(fake_api.requests) == 1


def test_async_local_model_runs_offline(policy_dir: Path, db_path: Path) -> None:
    async def run() -> str:
        settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
        async with AsyncGateway(settings) as gw:
            result = await gw.complete("offline_demo", "The reviewer")
            return result.model

    assert asyncio.run(run()) == "local:ngram"
