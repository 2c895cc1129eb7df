"""An AsyncGateway replay miss looks again for its answer under its lock, as Gateway's does,
then commits its intent as the provider sends the request it built once: the recorded bytes
are what the upstream received, and a miss whose answer was recorded while it waited for its
lock is served from the log with nothing sent and no REQUEST of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

from audit import AuditStore, EventKind
from gateway import AsyncGateway
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import settings_for

PROMPT = "Transaction: EUR 9,900 to ACME Shipping Ltd. Grüße ☃"


def test_a_replay_miss_records_the_bytes_the_upstream_received(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    async def run() -> None:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            first = await gw.complete("compliance_review", PROMPT)
            again = await gw.complete("compliance_review", PROMPT)
            assert not first.cached and again.cached

    asyncio.run(run())
    (sent,) = fake_api.requests
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        events = list(store.iter_events())
        assert [e.kind for e in events] == [
            EventKind.REQUEST,
            EventKind.RESPONSE,
            EventKind.CACHE_HIT,
        ]
        assert store.payload(events[0].payload_digests["request_body"]) == sent.body


def test_a_miss_answered_while_it_waited_for_its_lock_sends_nothing(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.set_default(lambda _request: Reply.slow(0.3, then=Reply.ok(text="held")))

    async def run() -> list[bool]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            results = await asyncio.gather(
                *(gw.complete("compliance_review", PROMPT) for _ in range(3))
            )
            assert {r.text for r in results} == {"held"}
            return sorted(r.cached for r in results)

    assert asyncio.run(run()) == [False, True, True]
    assert len(fake_api.requests) == 1
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        kinds = [e.kind for e in store.iter_events()]
    assert kinds.count(EventKind.REQUEST) == 1
    assert kinds.count(EventKind.CACHE_HIT) == 2
    assert kinds.count(EventKind.CANCELLED) == 0


def test_streamed_misses_answered_while_they_waited_stream_the_recorded_answer(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.set_default(lambda _request: Reply.stream("held answer", deltas=4, delay=0.1))

    async def one(gw: AsyncGateway) -> tuple[str, bool]:
        async with gw.stream("compliance_review", PROMPT) as stream:
            deltas = [
                event["delta"].get("text", "")
                async for event in stream
                if event["type"] == "content_block_delta"
            ]
            text = "".join(deltas)
        return text, stream.result.cached

    async def run() -> list[tuple[str, bool]]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            return list(await asyncio.gather(*(one(gw) for _ in range(3))))

    ended = asyncio.run(run())
    assert sorted(cached for _text, cached in ended) == [False, True, True]
    assert {text for text, _cached in ended} == {"held answer"}
    (sent,) = fake_api.requests
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        events = list(store.iter_events())
        kinds = [e.kind for e in events]
        assert kinds.count(EventKind.REQUEST) == 1
        assert kinds.count(EventKind.CACHE_HIT) == 2
        assert kinds.count(EventKind.CANCELLED) == kinds.count(EventKind.FAILED) == 0
        (request,) = [e for e in events if e.kind == EventKind.REQUEST]
        assert store.payload(request.payload_digests["request_body"]) == sent.body
