"""A request repeated exactly under a replay policy is planned once per gateway (_admitted):
each repeat gets its own request id and records what a freshly planned one would; an input
that only reads alike (other types, a caller's later change) is planned on its own."""

from __future__ import annotations

import asyncio
import enum
from datetime import date, timedelta
from pathlib import Path

import pytest

from gateway import AsyncGateway, Gateway, InputError
from gateway.request._prepared import Prepared, Request
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import events, kinds, settings_for

PROMPT = "Transaction: pay 250 GBP to Example Ltd"
DAY = (date(2026, 12, 3), date(2026, 12, 3))


def _admitted(gw: Gateway, request: Request) -> Prepared:
    prepared = gw._core.pipeline.admit(request)
    assert isinstance(prepared, Prepared)
    return prepared


def _request(content: object = PROMPT, **overrides: object) -> Request:
    return Request(
        "compliance_review",
        messages=[{"role": "user", "content": content}],
        caller="payments-svc",
        overrides=overrides or None,
    )


def test_a_repeated_replay_request_is_planned_once_with_its_own_request_id(gw: Gateway) -> None:
    first = _admitted(gw, _request(max_tokens=512))
    again = _admitted(gw, _request(max_tokens=512))
    assert again.plan is first.plan
    assert again.request_hash == first.request_hash
    assert again.request_id != first.request_id
    assert again.labels.request_id == again.request_id


def test_a_record_policy_and_other_inputs_are_planned_each_time(gw: Gateway) -> None:
    first = _admitted(gw, _request())
    assert _admitted(gw, _request("another transaction")).plan is not first.plan
    assert _admitted(gw, _request(max_tokens=512)).plan is not first.plan
    record = Request("quant_strategy", "FX momentum", caller="research")
    assert _admitted(gw, record).plan is not _admitted(gw, record).plan


class _Tokens(enum.IntEnum):
    FEW = 512


def test_inputs_alike_in_json_but_not_in_type_are_planned_apart(gw: Gateway) -> None:
    # An IntEnum writes and reads back as its value, and a tuple as an array: each is its
    # own input to the planner, which decides on it as it always did.
    planned = _admitted(gw, _request(max_tokens=512))
    assert _admitted(gw, _request(max_tokens=_Tokens.FEW)).plan is not planned.plan
    listed = Request("compliance_review", messages=[{"role": "user", "content": PROMPT}])
    with pytest.raises(InputError, match="messages must be a list"):
        gw._core.pipeline.prepare(
            Request("compliance_review", messages=({"role": "user", "content": PROMPT},))
        )
    _admitted(gw, listed)
    with pytest.raises(InputError, match="messages must be a list"):
        gw._core.pipeline.prepare(
            Request("compliance_review", messages=({"role": "user", "content": PROMPT},))
        )


def test_a_callers_later_change_to_its_messages_changes_no_later_request(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    messages = [{"role": "user", "content": PROMPT}]
    first = gw.complete("compliance_review", messages=messages, caller="payments-svc")
    messages[0]["content"] = "Transaction: pay 9,000,000 GBP to Elsewhere Ltd"
    again = gw.complete(
        "compliance_review",
        messages=[{"role": "user", "content": PROMPT}],
        caller="payments-svc",
    )
    assert again.cached and again.request_hash == first.request_hash
    changed = gw.complete("compliance_review", messages=messages, caller="payments-svc")
    assert not changed.cached and changed.request_hash != first.request_hash
    assert len(fake_api.requests) == 2
    assert "9,000,000" in fake_api.requests[1].body.decode()
    assert "9,000,000" not in fake_api.requests[0].body.decode()


def test_gateway_and_async_gateway_record_the_same_repeated_hits(
    policy_dir: Path, tmp_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # The same events and data, but for the ids and hashes each log gives anew.
    def recorded(db_path: Path) -> list[tuple[str, object, object]]:
        return [
            (str(e.kind), e.request_hash, e.data if e.kind == "request" else e.data["served_seq"])
            for e in events(db_path)
            if e.task == "compliance_review" and e.kind != "response"
        ]

    sync_db, async_db = tmp_path / "sync.db", tmp_path / "async.db"
    with Gateway(settings_for(policy_dir, sync_db, fake_api.base_url)) as gw:
        sync_ids = [gw.complete("compliance_review", PROMPT).request_id for _ in range(3)]

    async def run() -> list[str]:
        async with AsyncGateway(settings_for(policy_dir, async_db, fake_api.base_url)) as agw:
            return [(await agw.complete("compliance_review", PROMPT)).request_id for _ in range(3)]

    async_ids = asyncio.run(run())
    assert kinds(sync_db)[-3:] == kinds(async_db)[-3:] == ["response", "cache_hit", "cache_hit"]
    assert len(set(sync_ids)) == len(set(async_ids)) == 3
    assert recorded(sync_db) == recorded(async_db)


def test_the_memo_is_bounded_in_entries_and_bytes(gw: Gateway) -> None:
    from gateway.request._admitted import MAX_INPUT_BYTES, AdmittedMemo

    large = _request("x" * MAX_INPUT_BYTES)
    assert _admitted(gw, large).plan is not _admitted(gw, large).plan
    memo = AdmittedMemo(capacity=2, max_bytes=10_000)
    planned = _admitted(gw, _request())
    for key in (b"a" * 10, b"b" * 10, b"c" * 10):
        memo.put(key, planned, DAY)
    assert [memo.get(key, DAY) is not None for key in (b"a" * 10, b"b" * 10, b"c" * 10)] == [
        False,
        True,
        True,
    ]
    memo.put(b"d" * 9_995, planned, DAY)  # past the bytes: the least recently used go first
    assert memo.get(b"b" * 10, DAY) is None
    assert memo.get(b"c" * 10, DAY) is None
    assert memo.get(b"d" * 9_995, DAY) is planned


def test_a_plan_serves_only_on_the_day_it_was_made(gw: Gateway) -> None:
    # A policy's effective date and a model's retirement are checked against the day: the
    # first request of a new day (UTC, or local) is planned, and refused, afresh.
    from gateway.request._admitted import AdmittedMemo

    memo = AdmittedMemo()
    planned = _admitted(gw, _request())
    memo.put(b"key", planned, DAY)
    assert memo.get(b"key", DAY) is planned
    next_utc = (DAY[0] + timedelta(days=1), DAY[1])
    next_local = (DAY[0], DAY[1] + timedelta(days=1))
    assert memo.get(b"key", next_utc) is None
    assert memo.get(b"key", next_local) is None
