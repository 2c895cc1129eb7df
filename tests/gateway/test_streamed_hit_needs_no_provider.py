"""A replay hit is served from the audit log alone, streamed or not: it must not need the
provider that would have answered a miss (no API key, an upstream that cannot be reached).

The CACHE_HIT is committed before the stream opens; a stream that then fails to open leaves
a hit recorded that nobody was served (invariant 2 read backwards: the log says the caller was
answered)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from audit import AuditStore, EventKind
from gateway import AsyncGateway, Result, Settings
from tests.gateway.conftest import MakeGateway

PROMPT = "Transaction: EUR 4,100 to a long-standing supplier."


def test_a_streamed_replay_hit_is_served_without_an_api_key(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    first = make_gateway().complete("compliance_review", PROMPT)  # recorded through the fake

    keyless = make_gateway(anthropic_api_key=None)
    assert keyless.complete("compliance_review", PROMPT).text == first.text  # a hit: fine
    with keyless.stream("compliance_review", PROMPT) as s:
        events = list(s)
    assert events and s.result.cached and s.result.text == first.text

    with AuditStore.open(f"sqlite:///{db_path}", create=False) as store:
        hits = list(store.iter_events(kind=EventKind.CACHE_HIT))
    assert len(hits) == 2


def test_an_async_streamed_replay_hit_is_served_without_an_api_key(
    make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    first = make_gateway().complete("compliance_review", PROMPT)

    async def run() -> tuple[int, Result]:
        settings = Settings(
            policy_dir=policy_dir,
            database_url=f"sqlite:///{db_path}",
            anthropic_api_key=None,
            default_caller="tests",
            durability="os",
        )
        async with AsyncGateway(settings) as agw, agw.stream("compliance_review", PROMPT) as s:
            events = [event async for event in s]
        return len(events), s.result

    count, result = asyncio.run(run())
    assert count and result.cached and result.text == first.text
