"""`stream: true` through `gateway serve` with the official SDK's ``messages.stream``: events
as the API sends them, errors before and after the stream began, a client that leaves."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import anthropic
import httpx2 as httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` as a process

_count = itertools.count()


def fresh() -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Transaction: {next(_count)} GBP to Hooli"}]


@pytest.fixture(scope="module")
def key(server: ServerProcess) -> str:
    return server.create_key("trading-desk")


@pytest.fixture
def client(server: ServerProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def kinds(server: ServerProcess, request_id: str) -> list[str]:
    return [str(e.kind) for e in server.audit_events() if e.request_id == request_id]


def wait_for_outcome(server: ServerProcess, request_id: str, seconds: float = 5) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = kinds(server, request_id)
        if found and found[-1] in ("response", "failed", "cancelled"):
            return found
        time.sleep(0.05)
    return kinds(server, request_id)


def test_the_sdk_stream_helper_gets_every_event_and_the_final_message(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.stream("Alpha beta gamma delta", deltas=4))
    with client.messages.stream(
        model="compliance_review", max_tokens=512, messages=fresh()
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
        request_id = stream.response.headers["request-id"]
    assert text == "Alpha beta gamma delta"
    assert final.model == "claude-sonnet-4-6" and final.stop_reason == "end_turn"
    assert final.id == request_id  # the gateway's request id, as in a plain answer
    assert kinds(server, request_id) == ["request", "response"]
    callers = {e.caller for e in server.audit_events() if e.request_id == request_id}
    assert callers == {"trading-desk"}


def test_each_delta_reaches_the_client_before_the_upstream_sends_the_next(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    # The fake sends each delta only once the one before has reached the SDK client through
    # `gateway serve`: a server that held events back (buffered a response, waited for more
    # events, or recorded before forwarding) would make the fake wait in vain.
    pacer = threading.Semaphore(0)
    fake.script(Reply.stream("one two three four five", deltas=5, paced_by=pacer))
    deltas = 0
    with client.messages.create(
        model="compliance_review", max_tokens=512, messages=fresh(), stream=True
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                deltas += 1
                pacer.release()
        request_id = stream.response.headers["request-id"]
    assert deltas == 5
    assert fake.unpaced == 0  # every delta after the first waited for the one before
    assert wait_for_outcome(server, request_id) == ["request", "response"]


def test_the_wire_is_the_apis_event_stream(
    server: ServerProcess, key: str, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.stream("one two", deltas=2))
    body = {"model": "compliance_review", "max_tokens": 512, "messages": fresh(), "stream": True}
    with httpx.stream(
        "POST", f"{server.base_url}/v1/messages", json=body, headers={"x-api-key": key}
    ) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert answer.headers["request-id"].startswith("req_")
        names = [line[7:] for line in answer.iter_lines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert names.count("content_block_delta") == 2


def test_the_async_sdk_streams_too(server: ServerProcess, key: str, fake: FakeMessagesAPI) -> None:
    async def run() -> str:
        async with (
            anthropic.AsyncAnthropic(
                base_url=server.base_url, api_key=key, max_retries=0
            ) as client,
            client.messages.stream(
                model="compliance_review", max_tokens=512, messages=fresh()
            ) as stream,
        ):
            return "".join([t async for t in stream.text_stream])

    fake.script(Reply.stream("async words", deltas=2))
    assert asyncio.run(run()) == "async words"


def test_a_refusal_before_the_stream_is_a_typed_error(client: anthropic.Anthropic) -> None:
    with (
        pytest.raises(anthropic.BadRequestError),
        client.messages.stream(
            model="compliance_review", max_tokens=512, messages=fresh(), system="Be lax."
        ) as stream,
    ):
        stream.get_final_message()
    with (
        pytest.raises(anthropic.NotFoundError),
        client.messages.stream(model="nothing_here", max_tokens=512, messages=fresh()) as stream,
    ):
        stream.get_final_message()


def test_an_upstream_error_mid_stream_is_an_error_event_and_recorded_failed(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.stream("never finished", deltas=4, error_after=2))
    with (
        pytest.raises(anthropic.APIStatusError) as failed,
        client.messages.stream(
            model="compliance_review", max_tokens=512, messages=fresh()
        ) as stream,
    ):
        request_id = stream.response.headers["request-id"]
        for _ in stream.text_stream:
            pass
    assert "overloaded" in str(failed.value).lower()
    recorded = wait_for_outcome(server, request_id)
    assert recorded[0] == "request" and recorded[-1] == "failed"


def test_a_client_leaving_mid_stream_is_recorded_cancelled(
    server: ServerProcess, key: str, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.stream("slow " * 40, deltas=40, delay=0.05))
    body = {"model": "compliance_review", "max_tokens": 512, "messages": fresh(), "stream": True}
    with httpx.stream(
        "POST", f"{server.base_url}/v1/messages", json=body, headers={"x-api-key": key}
    ) as answer:
        request_id = answer.headers["request-id"]
        for line in answer.iter_lines():
            if line.startswith("event: content_block_delta"):
                break  # leave after the first delta: the connection closes
    assert wait_for_outcome(server, request_id) == ["request", "cancelled"]


def test_zz_the_log_verifies_after_the_streams(server: ServerProcess) -> None:
    done = server.verify()
    assert done.returncode == 0, done.stdout + done.stderr
