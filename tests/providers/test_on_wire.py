"""The provider builds each request once and announces its exact body bytes (``on_wire``)
before they are sent: the recorder commits the intent there, so nothing may go out first,
and an announcement that fails stops the send with its own error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from gateway.errors import AuditWriteError, ConfigurationError
from gateway.providers.anthropic import AnthropicProvider, AttemptFailure
from gateway.providers.base import ProviderReply
from gateway.providers.wire import _announce
from tests.fakes.messages_api import FakeMessagesAPI, Reply

KEY = "sk-ant-on-wire-0000"
BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "system": "You review transactions.",
    "messages": [{"role": "user", "content": "Grüße: wire 9,800 EUR ☃"}],
    "temperature": 0.0,
    "future_field": {"b": [1.0, None], "a": True},
}
MODES = ["send", "asend", "stream", "astream"]


def _provider(fake: FakeMessagesAPI) -> AnthropicProvider:
    return AnthropicProvider(
        api_key=KEY,
        base_url=fake.base_url,
        backoff_base_s=0.0,
        sleep=lambda _s: None,
        async_sleep=lambda _s: asyncio.sleep(0),
    )


def _call(
    mode: str,
    provider: AnthropicProvider,
    on_wire: Callable[[bytes], Any],
    on_attempt_failed: Callable[[AttemptFailure], None],
) -> ProviderReply:
    """One call through ``mode``; the reply (a stream's last item)."""
    body = {**BODY, "stream": True} if "stream" in mode else BODY
    options: dict[str, Any] = {
        "api_version": "2023-06-01",
        "on_attempt_failed": on_attempt_failed,
        "on_wire": on_wire,
    }
    if mode == "send":
        return provider.send(body, **options)
    if mode == "stream":
        items = list(provider.stream(body, **options))
        assert isinstance(items[-1], ProviderReply)
        return items[-1]

    async def run() -> ProviderReply:
        try:
            if mode == "asend":
                return await provider.asend(body, **options)
            items = [item async for item in provider.astream(body, **options)]
            assert isinstance(items[-1], ProviderReply)
            return items[-1]
        finally:
            await provider.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("mode", MODES)
def test_on_wire_is_told_each_attempts_bytes_before_the_upstream_sees_them(mode: str) -> None:
    told: list[tuple[bytes, int]] = []
    with FakeMessagesAPI() as fake:
        reply = Reply.stream("clear") if "stream" in mode else Reply.ok(text="clear")
        fake.script(Reply.error(503), reply)
        provider = _provider(fake)

        def on_wire(wire: bytes) -> None:
            told.append((wire, len(fake.requests)))  # how many requests the fake had seen

        try:
            result = _call(mode, provider, on_wire, lambda _f: None)
        finally:
            provider.close()
        received = [r.body for r in fake.requests]
    assert len(received) == 2  # the 503, then the answer
    # Announced once per attempt, each time before that attempt reached the upstream, with
    # exactly the bytes it then received; the reply names the same bytes.
    assert told == [(received[0], 0), (received[1], 1)]
    assert result.request_bytes == received[1]


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_announcement_sends_nothing_and_raises_its_own_error(mode: str) -> None:
    refused = AuditWriteError("the audit record (request) could not be committed.")
    attempts: list[AttemptFailure] = []

    def on_wire(_wire: bytes) -> None:
        raise refused

    with FakeMessagesAPI() as fake:
        provider = _provider(fake)
        try:
            with pytest.raises(AuditWriteError) as caught:
                _call(mode, provider, on_wire, attempts.append)
        finally:
            provider.close()
        assert fake.requests == []
    assert caught.value is refused  # not wrapped as a connection error, not retried
    assert attempts == []


@pytest.mark.parametrize("mode", ["asend", "astream"])
def test_a_coroutine_announcement_is_awaited_before_the_send(mode: str) -> None:
    seen_when_done: list[int] = []
    with FakeMessagesAPI() as fake:
        provider = _provider(fake)

        async def on_wire(_wire: bytes) -> None:
            await asyncio.sleep(0.05)  # as an audit write in a worker thread takes time
            seen_when_done.append(len(fake.requests))

        try:
            _call(mode, provider, on_wire, lambda _f: None)
        finally:
            provider.close()
        assert len(fake.requests) == 1
    assert seen_when_done == [0]


def test_a_token_count_on_the_same_client_is_not_announced() -> None:
    told: list[bytes] = []
    with FakeMessagesAPI() as fake:
        provider = _provider(fake)
        try:
            provider.send(
                BODY,
                api_version="2023-06-01",
                on_attempt_failed=lambda _f: None,
                on_wire=told.append,
            )
            provider.count_tokens(BODY, api_version="2023-06-01")
        finally:
            provider.close()
        assert len(fake.requests) == 2
    assert told == [fake.requests[0].body]


class _SendsLater:
    """An SDK call that has not sent anything when it is entered (as a release that sent
    lazily would be): the hook never ran, so nothing was announced."""

    def __init__(self) -> None:
        self.entered = False

    def __enter__(self) -> str:
        self.entered = True
        return "response"

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aenter__(self) -> str:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        return None


def test_a_call_entered_without_its_announcement_fails_closed() -> None:
    told: list[bytes] = []
    with pytest.raises(ConfigurationError, match="could not be recorded first"):  # noqa: SIM117
        with _announce.sending(_SendsLater(), told.append):
            pytest.fail("the body ran without the announcement")

    async def run() -> None:
        with pytest.raises(ConfigurationError, match="could not be recorded first"):
            async with _announce.asending(_SendsLater(), told.append):
                pytest.fail("the body ran without the announcement")

    asyncio.run(run())
    assert told == []
    with _announce.sending(
        _SendsLater(), None
    ) as opened:  # no announcement asked: nothing to check
        assert opened == "response"
