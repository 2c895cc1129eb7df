"""send() and asend() are twins: the same fault script gives the same reports, waits, wire
bytes and outcome through either, against the loopback fake."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import pytest

from gateway.errors import GatewayError, UpstreamRejected, UpstreamUnavailable
from gateway.providers.anthropic import (
    FIRST_PARTY,
    AnthropicProvider,
    AttemptFailure,
    ProviderReply,
)
from gateway.providers.wire import _body, classify
from tests.fakes.messages_api import FakeMessagesAPI, Reply

KEY = "sk-ant-twins-0000"
BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "system": [{"type": "text", "text": "You review transactions."}],
    "messages": [{"role": "user", "content": "Transaction 4711: clear or hold?"}],
    "temperature": 0.0,
}
STREAM_BODY: dict[str, Any] = {**BODY, "stream": True}


class AuditDown(Exception):
    """What a failing attempt recorder raises."""


@dataclass(frozen=True)
class Scenario:
    name: str
    script: tuple[Reply, ...]
    body: dict[str, Any]
    outcome: str  # "reply", or the name of the error class the call ends with
    refuse_attempt: int | None = None  # the attempt whose report the recorder refuses


SCENARIOS = [
    Scenario(
        "retry-after",
        (Reply.error(429, retry_after=1.5), Reply.error(529, retry_after_ms=250)),
        BODY,
        "reply",
    ),
    Scenario("500 then ok", (Reply.error(500),), BODY, "reply"),
    Scenario("dropped connection", (Reply.drop(),), BODY, "reply"),
    Scenario("error status cut off", (Reply.truncated(status=503),), BODY, "reply"),
    Scenario("retries exhausted", (Reply.error(529),) * 4, BODY, "UpstreamUnavailable"),
    Scenario(
        "bad request", (Reply.error(400, message="max_tokens: bad"),), BODY, "UpstreamRejected"
    ),
    Scenario("truncated 200", (Reply.truncated(), Reply.ok()), BODY, "UpstreamRejected"),
    Scenario("truncated stream", (Reply.truncated(), Reply.ok()), STREAM_BODY, "UpstreamRejected"),
    Scenario("malformed 200", (Reply.malformed(), Reply.ok()), BODY, "UpstreamRejected"),
    Scenario("malformed stream", (Reply.malformed(), Reply.ok()), STREAM_BODY, "UpstreamRejected"),
    Scenario(
        "stream error event",
        (Reply.stream_error(), Reply.ok(text="streamed")),
        STREAM_BODY,
        "reply",
    ),
    Scenario(
        "stream error, final type",
        (Reply.stream_error("invalid_request_error", "no"),),
        STREAM_BODY,
        "UpstreamRejected",
    ),
    Scenario(
        "recorder refuses",
        (Reply.error(500), Reply.error(529), Reply.ok()),
        BODY,
        "AuditDown",
        refuse_attempt=2,
    ),
]


@dataclass
class Run:
    """Everything observable about one call, minus the timings."""

    events: list[tuple[str, Any]]
    outcome: dict[str, Any]
    sent: list[tuple[bytes, str | None, str | None]]
    wire: bytes


def _reply_facts(reply: ProviderReply) -> dict[str, Any]:
    return {"kind": "reply", **reply.model_dump(exclude={"latency_ms", "total_ms"})}


def _error_facts(error: BaseException) -> dict[str, Any]:
    facts: dict[str, Any] = {"kind": type(error).__name__, "text": str(error)}
    if isinstance(error, GatewayError):
        facts["vars"] = dict(vars(error))
        facts["cause"] = type(error.__cause__).__name__
    return facts


def _without(url: str, value: Any) -> Any:
    """VALUE with URL (in any string inside it) replaced by a placeholder."""
    if isinstance(value, str):
        return value.replace(url.rstrip("/"), "<upstream>")
    if isinstance(value, dict):
        return {key: _without(url, item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_without(url, item) for item in value)
    return value


def _provider(fake: FakeMessagesAPI, events: list[tuple[str, Any]]) -> AnthropicProvider:
    def sleep(seconds: float) -> None:
        events.append(("sleep", seconds))

    async def async_sleep(seconds: float) -> None:
        events.append(("sleep", seconds))

    # No backoff base: a wait without retry-after is exactly 0.0, not a jittered draw.
    return AnthropicProvider(
        api_key=KEY,
        base_url=fake.base_url,
        backoff_base_s=0.0,
        sleep=sleep,
        async_sleep=async_sleep,
    )


def _recorder(
    scenario: Scenario, events: list[tuple[str, Any]]
) -> Callable[[AttemptFailure], None]:
    def record(failure: AttemptFailure) -> None:
        events.append(("failed", failure.model_dump(exclude={"latency_ms"})))
        if failure.attempt == scenario.refuse_attempt:
            raise AuditDown(f"attempt {failure.attempt} not recorded")

    return record


def _observe(
    scenario: Scenario, call: Callable[[AnthropicProvider, Callable[[AttemptFailure], None]], Any]
) -> Run:
    events: list[tuple[str, Any]] = []
    with FakeMessagesAPI() as fake:  # a fresh fake per run: the same request ids in both
        fake.script(*scenario.script)
        provider = _provider(fake, events)
        try:
            outcome = _reply_facts(call(provider, _recorder(scenario, events)))
        except Exception as exc:
            outcome = _error_facts(exc)
        wire = provider.wire_bytes(scenario.body)
        provider.close()
        # Each run has its own fake, so its own port: an error names the upstream's URL.
        events = _without(fake.base_url, events)
        outcome = _without(fake.base_url, outcome)
        sent = [
            (r.body, r.headers.get("anthropic-version"), r.headers.get("authorization"))
            for r in fake.requests
        ]
    return Run(events=events, outcome=outcome, sent=sent, wire=wire)


def run_sync(scenario: Scenario) -> Run:
    return _observe(
        scenario,
        lambda p, record: p.send(scenario.body, api_version="2023-06-01", on_attempt_failed=record),
    )


def run_async(scenario: Scenario, *, coroutine_recorder: bool) -> Run:
    def call(p: AnthropicProvider, record: Callable[[AttemptFailure], None]) -> Any:
        async def arecord(failure: AttemptFailure) -> None:
            await asyncio.sleep(0)  # yields to the loop, as an audit write in a thread does
            record(failure)

        async def go() -> ProviderReply:
            try:
                return await p.asend(
                    scenario.body,
                    api_version="2023-06-01",
                    on_attempt_failed=arecord if coroutine_recorder else record,
                )
            finally:
                await p.aclose()

        return asyncio.run(go())

    return _observe(scenario, call)


@pytest.mark.parametrize("coroutine_recorder", [False, True], ids=["sync-cb", "coroutine-cb"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_send_and_asend_see_the_same_attempts_waits_wire_and_outcome(
    scenario: Scenario, coroutine_recorder: bool
) -> None:
    sync = run_sync(scenario)
    async_ = run_async(scenario, coroutine_recorder=coroutine_recorder)

    assert sync.outcome["kind"] == scenario.outcome  # the script did what its name says
    assert async_.events == sync.events
    assert async_.outcome == sync.outcome
    assert async_.sent == sync.sent
    # Every attempt carried the recorded wire bytes, whichever twin sent it.
    assert {body for body, _, _ in sync.sent} == {sync.wire} == {async_.wire}
    if sync.outcome["kind"] == "reply":
        assert sync.outcome["request_bytes"] == sync.wire


def test_the_scenarios_cover_every_kind_of_decision() -> None:
    # Guards the table above: a twin test that lost its fault cases would prove nothing.
    runs = {s.name: run_sync(s) for s in SCENARIOS}
    kinds = {
        event[1]["error_type"]
        for run in runs.values()
        for event in run.events
        if event[0] == "failed"
    }
    assert {
        "rate_limit_error",
        "overloaded_error",
        "api_error",
        "connection_error",
        "invalid_request_error",
        "truncated_response",
        "malformed_response",
    } <= kinds
    assert ("sleep", 1.5) in runs["retry-after"].events
    assert ("sleep", 0.25) in runs["retry-after"].events
    final = {s.outcome for s in SCENARIOS}
    assert {"reply", UpstreamRejected.__name__, UpstreamUnavailable.__name__, "AuditDown"} == final


# -- the shared stream assembly ------------------------------------------------------------


def _events(*pairs: tuple[str, str]) -> bytes:
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in pairs)


START = (
    '{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": '
    '"assistant", "model": "m", "content": [], "stop_reason": null, "stop_sequence": null, '
    '"usage": {"input_tokens": 1, "output_tokens": 1}}}'
)
TEXT_EVENTS = (
    ("message_start", START),
    (
        "content_block_start",
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "text", '
        '"text": ""}}',
    ),
    (
        "content_block_delta",
        '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", '
        '"text": "hello"}}',
    ),
    ("content_block_stop", '{"type": "content_block_stop", "index": 0}'),
    ("message_stop", '{"type": "message_stop"}'),
)


@pytest.fixture
def sdk_client() -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(api_key="unused", base_url="http://127.0.0.1:9")
    yield client
    client.close()


def _read(content: bytes, headers: dict[str, str]) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages", content=b"{}")
    return httpx2.Response(200, headers=headers, content=content, request=request)


def test_a_compressed_stream_is_assembled_from_its_decoded_bytes(
    sdk_client: anthropic.Anthropic,
) -> None:
    response = _read(
        gzip.compress(_events(*TEXT_EVENTS)),
        {"content-encoding": "gzip", "content-type": "text/event-stream", "request-id": "r1"},
    )
    message = _body.assemble_stream(sdk_client, response, response.content)
    assert (message["id"], message["content"][0]["text"]) == ("msg_1", "hello")


@pytest.mark.parametrize(
    "content",
    [
        b'{"id": "msg", "content": [',  # not an event stream at all
        _events(("message_start", "{not json")),
        _events(TEXT_EVENTS[2]),  # a delta before any message_start
    ],
    ids=["json-body", "event-not-json", "no-message-start"],
)
def test_a_stream_that_does_not_add_up_to_a_message_is_malformed(
    sdk_client: anthropic.Anthropic, content: bytes
) -> None:
    response = _read(content, {"content-type": "text/event-stream", "request-id": "r1"})
    with pytest.raises(_body.MalformedResponse) as caught:
        _body.assemble_stream(sdk_client, response, response.content)
    assert caught.value.response is response


def test_an_error_event_keeps_its_type_status_and_request_id(
    sdk_client: anthropic.Anthropic,
) -> None:
    error = '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    response = _read(
        _events(TEXT_EVENTS[0], ("error", error)),
        {"content-type": "text/event-stream", "request-id": "req_9", "retry-after": "2"},
    )
    with pytest.raises(anthropic.APIStatusError) as caught:
        _body.assemble_stream(sdk_client, response, response.content)
    failure = classify(caught.value, profile=FIRST_PARTY, secrets=())
    assert (failure.status, failure.error_type, failure.upstream_request_id) == (
        200,
        "overloaded_error",
        "req_9",
    )
    assert failure.retryable and failure.retry_after_s == 2.0
    assert failure.request_bytes == b"{}"
