"""The lean upstream leg: the gateway writes a body's bytes once and the SDK's HTTP client posts
exactly those, the bytes create() would have written, with the same headers; what is recorded
is what the upstream received. A body json does not write natively, or an SDK that writes
another order, gets create() as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import math
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from gateway.errors import UpstreamError
from gateway.providers.anthropic import FIRST_PARTY, AnthropicProvider, ApiKeyAuth
from gateway.providers.wire import MessagesProvider
from gateway.providers.wire._capture import WireCapture
from gateway.providers.wire._lean import LeanBody
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.providers.test_wire_capture import BODIES, SDKWithRenamedStep

# A framework's request: caller system blocks and tools, a float among the sampling fields
# (orjson's bytes are not kept for it), fields in the caller's order, not the SDK's.
FRAMEWORK: dict[str, Any] = {
    "temperature": 0.7,
    "tools": [
        {
            "name": f"desk_tool_{n}",
            "description": "Looks up a record \u2014 never guesses. " * 4,
            "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}},
        }
        for n in range(20)
    ],
    "model": "claude-sonnet-4-6",
    "system": [{"type": "text", "text": 'You are the desk assistant.\n\t"quoted" \\ ü 😀'}],
    "messages": [{"role": "user", "content": "Momentum on FX majors"}],
    "tool_choice": {"type": "auto"},
    "max_tokens": 1024,
    "anthropic_beta": ["context-management-2025-06-27"],
}
ALL = {**BODIES, "framework": FRAMEWORK}
# Headers that differ between any two requests of one client (counters and timeouts).
_PER_REQUEST = {"x-stainless-retry-count", "x-stainless-read-timeout", "x-stainless-timeout"}


@pytest.fixture
def public() -> Iterator[WireCapture]:
    capture = WireCapture(SDKWithRenamedStep)  # the SDK's whole public create() path
    yield capture
    capture.close()


def test_the_gateways_bytes_are_the_sdks_own(public: WireCapture) -> None:
    lean = LeanBody(public)
    assert lean.on
    for name, body in ALL.items():
        assert lean.wire_bytes(body) == public.wire_bytes(body), name
        streamed = {**body, "stream": True}
        assert lean.wire_bytes(streamed) == public.wire_bytes(streamed), name


def test_what_json_does_not_write_natively_is_left_to_create(public: WireCapture) -> None:
    lean = LeanBody(public)
    plain = BODIES["plain"]
    for odd in (
        {**plain, "temperature": math.nan},  # the SDK's encoder refuses it
        {**plain, "metadata": {"user_id": "\ud800"}},  # not text
        {**plain, "future_field": datetime.date(2026, 12, 2)},  # the SDK's encoder's default
    ):
        assert lean.wire_bytes(odd) is None
    # A key json writes as a string is written as the SDK writes it.
    odd = {**plain, "future_field": {1: "a non-string key", "t": (1, 2.5)}}
    assert lean.wire_bytes(odd) == public.wire_bytes(odd)


class SDKThatSortsTheBody(anthropic.Anthropic):
    """A release that writes the body's fields in sorted order (extra_body's too)."""

    def _build_request(self, options: Any, *, retries_taken: int = 0) -> Any:
        if isinstance(options.json_data, dict):
            options = options.model_copy(
                update={"json_data": dict(sorted(options.json_data.items()))}
            )
        return super()._build_request(options, retries_taken=retries_taken)


def test_an_sdk_that_writes_another_order_turns_the_lean_leg_off() -> None:
    capture = WireCapture(SDKThatSortsTheBody)
    try:
        lean = LeanBody(capture)
        assert not lean.on
        assert lean.wire_bytes(BODIES["plain"]) is None
    finally:
        capture.close()


def _providers(base_url: str) -> tuple[MessagesProvider, MessagesProvider]:
    lean = AnthropicProvider(api_key="sk-ant-lean", base_url=base_url)
    # The same transport with no lean leg: every body through create(), as before it.
    through_create = MessagesProvider(
        dataclasses.replace(FIRST_PARTY, messages_path=None),
        ApiKeyAuth("sk-ant-lean"),
        base_url=base_url,
    )
    return lean, through_create


def _sent(request: Any) -> tuple[str, str, dict[str, str], bytes]:
    headers = {k: v for k, v in request.headers.items() if k not in _PER_REQUEST}
    return request.method, request.path, headers, request.body


@pytest.mark.parametrize("name", list(ALL))
def test_the_lean_leg_sends_what_create_sent_and_records_what_was_received(
    name: str, fake_api: FakeMessagesAPI
) -> None:
    body = ALL[name]
    lean, through_create = _providers(fake_api.base_url)
    told: list[bytes] = []
    try:
        reply = lean.send(
            body,
            api_version="2023-06-01",
            on_attempt_failed=print,
            on_wire=lambda wire, **_: told.append(wire),
        )
        through_create.send(body, api_version="2023-06-01", on_attempt_failed=print)
        streamed = [
            item
            for item in lean.stream(body, api_version="2023-06-01", on_attempt_failed=print)
            if not isinstance(item, dict)
        ]
        first, second, third = fake_api.requests
        assert _sent(first) == _sent(second)  # headers and bytes, byte for byte
        assert told == [first.body] == [reply.request_bytes]  # recorded == received
        assert lean.wire_bytes(body) == first.body
        assert streamed[-1].request_bytes == third.body == lean.wire_bytes({**body, "stream": True})
    finally:
        lean.close()
        through_create.close()


def test_the_async_lean_leg_records_what_was_received(fake_api: FakeMessagesAPI) -> None:
    lean, through_create = _providers(fake_api.base_url)
    told: list[bytes] = []

    async def on_wire(wire: bytes, **_: object) -> None:
        told.append(wire)

    async def run() -> None:
        try:
            reply = await lean.asend(
                FRAMEWORK, api_version="2023-06-01", on_attempt_failed=print, on_wire=on_wire
            )
            assert told == [reply.request_bytes]
            await through_create.asend(FRAMEWORK, api_version="2023-06-01", on_attempt_failed=print)
            async for _ in lean.astream(
                FRAMEWORK, api_version="2023-06-01", on_attempt_failed=print
            ):
                pass
        finally:
            await lean.aclose()
            await through_create.aclose()

    asyncio.run(run())
    first, second, third = fake_api.requests
    assert _sent(first) == _sent(second)
    assert told == [first.body]
    assert third.json == {
        **{k: v for k, v in FRAMEWORK.items() if k != "anthropic_beta"},
        "stream": True,
    }
    assert third.headers["anthropic-beta"] == "context-management-2025-06-27"


def test_an_upstream_error_is_classified_as_through_create(fake_api: FakeMessagesAPI) -> None:
    lean, through_create = _providers(fake_api.base_url)
    try:
        errors = []
        for provider in (lean, through_create):
            fake_api.script(Reply.error(400, message="bad field"))
            with pytest.raises(UpstreamError) as caught:
                provider.send(BODIES["plain"], api_version="2023-06-01", on_attempt_failed=print)
            error = caught.value
            errors.append((type(error), error.status, error.error_type, error.attempts))
        assert errors[0] == errors[1]
    finally:
        lean.close()
        through_create.close()
