"""The REQUEST holds, byte for byte, the body the upstream received, plain and streamed,
through Gateway and AsyncGateway, and it is committed before the upstream sees the request
(the provider announces the bytes of the request it built, and sends them once recorded)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from audit import AuditStore
from gateway import Gateway
from gateway.result import Result
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.streaming.conftest import MakeAsync, events, payload, terminal, verified

PROMPT = "Summarise the exposure of desk 7 to EUR rates: Grüße ☃"
WAYS = [
    ("sync", False),
    ("sync", True),
    ("async", False),
    ("async", True),
]


def _run(gw: Gateway, make_async: MakeAsync, api: str, streamed: bool) -> Result:
    if api == "sync":
        if not streamed:
            return gw.complete("chat", PROMPT)
        with gw.stream("chat", PROMPT) as s:
            for _event in s:
                pass
        return s.result

    async def go() -> Result:
        async with make_async() as agw:
            if not streamed:
                return await agw.complete("chat", PROMPT)
            async with agw.stream("chat", PROMPT) as s:
                async for _event in s:
                    pass
            return s.result

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("api", "streamed"), WAYS, ids=[f"{a}-{'stream' if s else 'plain'}" for a, s in WAYS]
)
def test_the_request_event_holds_the_bytes_the_upstream_received_committed_before_it(
    gw: Gateway,
    make_async: MakeAsync,
    fake_api: FakeMessagesAPI,
    db_path: Path,
    api: str,
    streamed: bool,
) -> None:
    # Each attempt looks into the audit log as it arrives: the REQUEST must already be there.
    committed_before: list[list[bytes]] = []

    def answer(request: RecordedRequest) -> Reply:
        with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
            requests = [e for e in store.iter_events() if str(e.kind) == "request"]
            committed_before.append(
                [store.payload(e.payload_digests["request_body"]) for e in requests]
            )
        if len(committed_before) == 1:
            return Reply.error(529)  # one retry: the second attempt carries the same bytes
        return Reply.stream("exposure is low") if streamed else Reply.ok(text="exposure is low")

    fake_api.set_default(answer)
    result = _run(gw, make_async, api, streamed)

    [first, second] = fake_api.requests
    assert first.body == second.body
    request_events = [e for e in events(db_path, result.request_id) if str(e.kind) == "request"]
    assert len(request_events) == 1
    recorded = payload(db_path, request_events[0], "request_body")
    assert recorded == first.body  # byte for byte
    assert committed_before == [[recorded], [recorded]]
    end = terminal(db_path, result.request_id)
    assert str(end.kind) == "response"
    assert end.data["sent_as_recorded"] is True
    assert end.data["attempts"] == 2
    verified(db_path)


def test_a_stream_left_before_its_first_event_still_has_one_outcome(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream("a long answer", deltas=4, first_delay=0.05))
    with gw.stream("chat", PROMPT) as s:
        request_id = s.request_id
    kinds = [str(e.kind) for e in events(db_path, request_id)]
    assert kinds == ["request", "cancelled"]
    verified(db_path)
