"""The Anthropic provider against the loopback fake, through the real SDK and real sockets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import UpstreamRejected, UpstreamUnavailable
from gateway.providers.anthropic import AnthropicProvider, AttemptFailure
from tests.fakes.messages_api import FakeMessagesAPI, Reply

KEY = "sk-ant-test-7f3c9e1d-never-on-disk"
PROMPT = "Transaction 4711: wire 9,800 EUR to account DE89 3704 0044 0532 0130 00"
SAMPLING_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 256,
    "system": "You review transactions.",
    "messages": [{"role": "user", "content": PROMPT}],
    "temperature": 0.0,
    "stop_sequences": ["</verdict>"],
}
CURRENT_BODY: dict[str, Any] = {
    "model": "claude-opus-4-8",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": PROMPT}],
}


class Recorder:
    """Records failed attempts and waits, in the order they happen."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def failed(self, failure: AttemptFailure) -> None:
        self.events.append(("failed", failure))

    def sleep(self, seconds: float) -> None:
        self.events.append(("sleep", seconds))

    async def async_sleep(self, seconds: float) -> None:
        self.events.append(("sleep", seconds))

    @property
    def failures(self) -> list[AttemptFailure]:
        return [e[1] for e in self.events if e[0] == "failed"]

    @property
    def sleeps(self) -> list[float]:
        return [e[1] for e in self.events if e[0] == "sleep"]


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def provider(fake_api: FakeMessagesAPI, rec: Recorder) -> Iterator[AnthropicProvider]:
    p = AnthropicProvider(
        api_key=KEY, base_url=fake_api.base_url, sleep=rec.sleep, async_sleep=rec.async_sleep
    )
    yield p
    p.close()


def send(p: AnthropicProvider, rec: Recorder, body: dict[str, Any] | None = None) -> Any:
    return p.send(body or SAMPLING_BODY, api_version="2023-06-01", on_attempt_failed=rec.failed)


# -- the wire -------------------------------------------------------------------------------


def test_sampling_body_goes_out_exactly_with_the_old_api_version(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    reply = send(provider, rec)
    [seen] = fake_api.requests
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.json == SAMPLING_BODY
    assert seen.json["temperature"] == 0.0
    assert seen.body == provider.wire_bytes(SAMPLING_BODY)
    assert reply.request_bytes == seen.body
    assert reply.status == 200 and reply.attempts == 1 and rec.events == []


def test_current_model_body_carries_no_sampling_field(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    provider.send(CURRENT_BODY, api_version="2026-10-21", on_attempt_failed=rec.failed)
    [seen] = fake_api.requests
    assert seen.headers["anthropic-version"] == "2026-10-21"
    assert seen.json == CURRENT_BODY
    assert not {"temperature", "top_p", "top_k"} & set(seen.json)
    assert seen.body == provider.wire_bytes(CURRENT_BODY)


def test_unknown_and_nested_fields_are_sent_unchanged(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    body = {
        **CURRENT_BODY,
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
        "metadata": {"user_id": "payments-svc"},
        "future_field": {"b": 1, "a": [1.0, 2]},
        "top_k": 5,
    }
    provider.send(body, api_version="2023-06-01", on_attempt_failed=rec.failed)
    [seen] = fake_api.requests
    assert seen.json == body
    assert seen.body == provider.wire_bytes(body)


def test_reply_carries_raw_response_request_id_and_rate_limits(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.ok(text="verdict: clear", model="claude-sonnet-4-6-echo"))
    reply = send(provider, rec)
    assert json.loads(reply.response_bytes) == reply.response
    assert reply.response["model"] == "claude-sonnet-4-6-echo"
    assert reply.response["content"][0]["text"] == "verdict: clear"
    assert reply.upstream_request_id == "req_fake_1"
    assert reply.rate_limits["anthropic-ratelimit-requests-remaining"] == "3999"
    assert reply.latency_ms > 0


def test_large_max_tokens_is_sent_without_streaming(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    # The SDK refuses max_tokens > 21,333 without streaming unless a timeout is explicit.
    body = {**CURRENT_BODY, "max_tokens": 64_000}
    reply = provider.send(body, api_version="2026-10-21", on_attempt_failed=rec.failed)
    assert reply.status == 200
    assert fake_api.requests[0].json == body


def test_environment_settings_it_was_not_given_have_no_effect(
    fake_api: FakeMessagesAPI, rec: Recorder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config_dir = tmp_path / "anthropic-config"
    (config_dir / "configs").mkdir(parents=True)
    (config_dir / "configs" / "default.json").write_text(
        json.dumps({"base_url": "http://127.0.0.1:9", "api_key": "profile-key"})
    )
    (config_dir / "active_config").write_text("default")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-api-key")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "env-auth-token")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(config_dir))
    monkeypatch.setenv("ANTHROPIC_PROFILE", "default")
    monkeypatch.setenv(
        "ANTHROPIC_CUSTOM_HEADERS",
        "X-Env-Leak: yes\nAuthorization: Bearer env-header\nanthropic-version: 1999-01-01\n"
        "anthropic-beta: env-beta",
    )
    p = AnthropicProvider(api_key=KEY, base_url=fake_api.base_url, sleep=rec.sleep)
    try:
        send(p, rec)
    finally:
        p.close()
    [seen] = fake_api.requests  # reached the fake, not the env base URL
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert "x-env-leak" not in seen.headers
    assert "anthropic-beta" not in seen.headers
    assert not any("env-" in v for v in seen.headers.values())


# -- retries --------------------------------------------------------------------------------


def test_retry_after_is_honoured(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(429, retry_after=1.5), Reply.error(529, retry_after_ms=250))
    reply = send(provider, rec)
    assert rec.sleeps == [1.5, 0.25]
    assert reply.attempts == 3
    assert [f.retry_after_s for f in rec.failures] == [1.5, 0.25]


def test_retry_after_is_capped(fake_api: FakeMessagesAPI, rec: Recorder) -> None:
    p = AnthropicProvider(
        api_key=KEY, base_url=fake_api.base_url, retry_after_cap_s=60.0, sleep=rec.sleep
    )
    fake_api.script(Reply.error(429, retry_after=3600))
    try:
        send(p, rec)
    finally:
        p.close()
    assert rec.sleeps == [60.0]
    assert rec.failures[0].retry_after_s == 3600.0  # what the server asked, for the record


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 529])
def test_retryable_statuses_are_retried(
    status: int, provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(status))
    reply = send(provider, rec)
    assert reply.attempts == 2
    [failure] = rec.failures
    assert failure.status == status and failure.will_retry and failure.attempt == 1
    assert failure.upstream_request_id == "req_fake_1"
    assert reply.upstream_request_id == "req_fake_2"
    # Without retry-after: exponential backoff from 0.5 s, jittered by at most 25 %.
    assert 0.375 <= rec.sleeps[0] <= 0.5


def test_failure_is_reported_before_the_wait(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(500), Reply.error(529))
    send(provider, rec)
    assert [kind for kind, _ in rec.events] == ["failed", "sleep", "failed", "sleep"]
    assert [f.attempt for f in rec.failures] == [1, 2]


def test_retries_exhausted_raise_upstream_unavailable(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(*[Reply.error(529)] * 4, Reply.ok())
    with pytest.raises(UpstreamUnavailable) as caught:
        send(provider, rec)
    err = caught.value
    assert err.attempts == 4 and err.status == 529 and err.error_type == "overloaded_error"
    assert err.upstream_request_id == "req_fake_4"
    assert [f.will_retry for f in rec.failures] == [True, True, True, False]
    assert len(rec.sleeps) == 3  # no wait after the last attempt
    assert len(fake_api.requests) == 4 and fake_api.pending == 1


def test_bad_request_is_not_retried(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(400, message="max_tokens: must be positive"))
    with pytest.raises(UpstreamRejected) as caught:
        send(provider, rec)
    err = caught.value
    assert (err.status, err.error_type, err.attempts) == (400, "invalid_request_error", 1)
    assert err.upstream_request_id == "req_fake_1"
    assert str(err).startswith(
        "the model provider refused the request: invalid_request_error "
        "(HTTP 400, upstream request req_fake_1): the upstream found the request invalid."
    )
    assert len(fake_api.requests) == 1 and rec.sleeps == []
    [failure] = rec.failures
    assert failure.will_retry is False
    # the upstream's own words are kept apart, for the audit record only
    assert "max_tokens: must be positive" not in failure.message
    assert failure.upstream_message == "max_tokens: must be positive"


@pytest.mark.parametrize("status", [401, 403, 404, 413])
def test_other_client_errors_are_rejected_at_once(
    status: int, provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(status))
    with pytest.raises(UpstreamRejected) as caught:
        send(provider, rec)
    assert caught.value.status == status and len(fake_api.requests) == 1


def test_dropped_connection_is_retried(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.drop())
    reply = send(provider, rec)
    [failure] = rec.failures
    assert failure.error_type == "connection_error" and failure.status is None
    assert reply.attempts == 2 and len(fake_api.requests) == 2


def test_timeout_is_retried(fake_api: FakeMessagesAPI, rec: Recorder) -> None:
    p = AnthropicProvider(api_key=KEY, base_url=fake_api.base_url, timeout_s=0.3, sleep=rec.sleep)
    fake_api.script(Reply.slow(5.0))
    try:
        reply = send(p, rec)
    finally:
        p.close()
    [failure] = rec.failures
    assert failure.error_type == "timeout" and failure.will_retry
    assert 250 <= failure.latency_ms < 3000
    assert reply.attempts == 2


def test_malformed_json_is_a_typed_error_and_not_retried(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.malformed())
    with pytest.raises(UpstreamRejected) as caught:
        send(provider, rec)
    err = caught.value
    assert (err.status, err.error_type, err.attempts) == (200, "malformed_response", 1)
    assert err.upstream_request_id == "req_fake_1"
    assert len(fake_api.requests) == 1


def test_no_duplicate_success(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(500), Reply.ok(text="first"), Reply.ok(text="second"))
    reply = send(provider, rec)
    assert reply.response["content"][0]["text"] == "first"
    assert len(fake_api.requests) == 2 and fake_api.pending == 1


def test_a_raising_callback_stops_at_once(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    class AuditDown(Exception):
        pass

    def refuse(_failure: AttemptFailure) -> None:
        raise AuditDown

    fake_api.script(Reply.error(529), Reply.ok())
    with pytest.raises(AuditDown):
        provider.send(SAMPLING_BODY, api_version="2023-06-01", on_attempt_failed=refuse)
    assert len(fake_api.requests) == 1 and rec.sleeps == []


# -- streams --------------------------------------------------------------------------------


def test_stream_error_event_is_retried_by_its_type(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.stream_error("overloaded_error"), Reply.ok(text="streamed verdict"))
    body = {**SAMPLING_BODY, "stream": True}
    reply = send(provider, rec, body)
    [failure] = rec.failures
    assert (failure.status, failure.error_type) == (200, "overloaded_error")
    assert failure.will_retry and failure.upstream_request_id == "req_fake_1"
    assert reply.attempts == 2
    assert reply.response["content"][0]["text"] == "streamed verdict"
    assert reply.response["stop_reason"] == "end_turn"
    assert reply.response_bytes.startswith(b"event: message_start")
    assert fake_api.requests[1].body == provider.wire_bytes(body) == reply.request_bytes


def test_stream_error_of_a_final_type_is_not_retried(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.stream_error("invalid_request_error", "bad"))
    with pytest.raises(UpstreamRejected) as caught:
        send(provider, rec, {**SAMPLING_BODY, "stream": True})
    assert (caught.value.status, caught.value.error_type) == (200, "invalid_request_error")


# -- secrets --------------------------------------------------------------------------------


def test_key_and_prompt_never_appear_in_failures_or_errors(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(
        Reply.error(500, message=f"upstream saw key {KEY}"),
        Reply.drop(),
        Reply.error(529, message=f"could not process: {PROMPT}"),
        Reply.error(401, message=f"invalid x-api-key {KEY}"),
    )
    with pytest.raises(UpstreamRejected) as caught:
        send(provider, rec)
    texts = [f.model_dump_json(exclude={"upstream_message"}) for f in rec.failures]
    texts += [str(caught.value), repr(caught.value), repr(provider)]
    assert all(KEY not in (f.upstream_message or "") for f in rec.failures)
    assert len(rec.failures) == 4
    for text in texts:
        assert KEY not in text
        assert PROMPT[:24] not in text
    assert "could not process" not in rec.failures[2].message
    assert rec.failures[0].upstream_message == "upstream saw key [secret withheld]"


SHORT_LINES = "Name: Jane Doe\nIBAN: DE89 3704 0044 0532 0130 00\nSSN: 078-05-1120"
SHORT_LINES_BODY: dict[str, Any] = {
    **CURRENT_BODY,
    "messages": [{"role": "user", "content": SHORT_LINES}],
}


@pytest.mark.parametrize("status", [400, 529])
def test_an_echoed_prompt_of_short_lines_stays_out_of_messages_and_errors(
    status: int, provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    # An upstream that quotes the request back: a whitespace-collapsing filter missed this.
    echo = f"could not process the request:\n{SHORT_LINES}"
    fake_api.script(*[Reply.error(status, message=echo)] * 4)
    with pytest.raises((UpstreamRejected, UpstreamUnavailable)) as caught:
        send(provider, rec, SHORT_LINES_BODY)
    shown = [str(caught.value), repr(caught.value), caught.value.hint or ""]
    shown += [f.message for f in rec.failures]
    for text in shown:
        for piece in ("Jane Doe", "DE89", "078-05-1120", "could not process"):
            assert piece not in text, text
    assert all(f.upstream_message == echo for f in rec.failures)


def test_an_upstream_error_type_that_is_not_an_identifier_is_not_repeated(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(400, error_type="Name: Jane Doe"))
    with pytest.raises(UpstreamRejected) as caught:
        send(provider, rec, SHORT_LINES_BODY)
    assert caught.value.error_type == "http_400"
    assert "Jane" not in str(caught.value) and "Jane" not in rec.failures[0].message


# -- a 200 that breaks off ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_truncated_200_is_rejected_with_its_status_and_request_id_not_retried(
    stream: bool, provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.truncated(), Reply.ok(text="a second run of the same work"))
    body = {**SAMPLING_BODY, "stream": True} if stream else SAMPLING_BODY
    with pytest.raises(UpstreamRejected) as caught:
        send(provider, rec, body)
    err = caught.value
    assert (err.status, err.error_type, err.attempts) == (200, "truncated_response", 1)
    assert err.upstream_request_id == "req_fake_1"
    assert len(fake_api.requests) == 1 and fake_api.pending == 1  # sent once, never again
    [failure] = rec.failures
    assert (failure.status, failure.error_type, failure.will_retry) == (
        200,
        "truncated_response",
        False,
    )
    assert failure.upstream_request_id == "req_fake_1"
    assert "req_fake_1" in failure.message and rec.sleeps == []


def test_an_error_status_whose_body_breaks_off_is_a_retryable_connection_error(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    # The SDK reads an error body itself; a cut there must not escape as a raw httpx error.
    fake_api.script(Reply.truncated(status=503), Reply.ok(text="after the cut"))
    reply = send(provider, rec)
    [failure] = rec.failures
    assert (failure.error_type, failure.will_retry) == ("connection_error", True)
    assert reply.response["content"][0]["text"] == "after the cut" and reply.attempts == 2


def test_async_truncated_200_is_not_retried(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.truncated(), Reply.ok())

    async def run() -> None:
        try:
            await provider.asend(
                SAMPLING_BODY, api_version="2023-06-01", on_attempt_failed=rec.failed
            )
        finally:
            await provider.aclose()

    with pytest.raises(UpstreamRejected) as caught:
        asyncio.run(run())
    assert (caught.value.status, caught.value.error_type) == (200, "truncated_response")
    assert caught.value.upstream_request_id == "req_fake_1"
    assert len(fake_api.requests) == 1


# -- async ----------------------------------------------------------------------------------


def test_async_send_retries_and_matches_the_wire(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(429, retry_after=2), Reply.drop(), Reply.ok(text="async"))

    async def run() -> Any:
        try:
            return await provider.asend(
                SAMPLING_BODY, api_version="2023-06-01", on_attempt_failed=rec.failed
            )
        finally:
            await provider.aclose()

    expected_wire = provider.wire_bytes(SAMPLING_BODY)
    reply = asyncio.run(run())
    assert reply.attempts == 3 and rec.sleeps[0] == 2.0 and len(rec.sleeps) == 2
    assert [f.error_type for f in rec.failures] == ["rate_limit_error", "connection_error"]
    assert reply.response["content"][0]["text"] == "async"
    assert fake_api.requests[-1].body == expected_wire == reply.request_bytes
    assert fake_api.requests[-1].headers["x-stainless-async"] != "false"


def test_async_stream_and_rejection(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.stream_error(), Reply.ok(text="s"), Reply.error(400))

    async def run() -> Any:
        try:
            body = {**SAMPLING_BODY, "stream": True}
            first = await provider.asend(
                body, api_version="2023-06-01", on_attempt_failed=rec.failed
            )
            with pytest.raises(UpstreamRejected):
                await provider.asend(
                    SAMPLING_BODY, api_version="2023-06-01", on_attempt_failed=rec.failed
                )
            return first
        finally:
            await provider.aclose()

    reply = asyncio.run(run())
    assert reply.response["content"][0]["text"] == "s" and reply.attempts == 2
    assert [f.error_type for f in rec.failures] == ["overloaded_error", "invalid_request_error"]


def test_async_send_awaits_a_coroutine_callback_before_retrying(
    provider: AnthropicProvider, fake_api: FakeMessagesAPI, rec: Recorder
) -> None:
    fake_api.script(Reply.error(529), Reply.error(500), Reply.ok())

    async def record(failure: AttemptFailure) -> None:
        await asyncio.sleep(0.01)  # a recorder that yields to the loop, as an audit write does
        rec.events.append(("failed", failure))
        if failure.attempt == 2:
            raise RuntimeError("the audit write failed")

    async def run() -> None:
        try:
            await provider.asend(SAMPLING_BODY, api_version="2023-06-01", on_attempt_failed=record)
        finally:
            await provider.aclose()

    with pytest.raises(RuntimeError, match="audit write failed"):
        asyncio.run(run())
    # Each report completed before the wait that follows it; a failing report stops the sends.
    assert [e[0] for e in rec.events] == ["failed", "sleep", "failed"]
    assert len(fake_api.requests) == 2
