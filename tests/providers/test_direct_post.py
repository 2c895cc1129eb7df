"""The lean leg's direct post, sync and async: the SDK's headers, built by the SDK once per call
shape, and its HTTP client's send. What reaches the upstream, what is recorded and how a
failure reads are the same as through ``create()`` (the sync face's bytes and headers:
tests/providers/test_lean_leg.py); a client that prepares its own requests (Bedrock's
signature, Vertex's token) is left to the SDK."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any

import anthropic
import httpx2
import pytest

from gateway.errors import GatewayError
from gateway.providers.anthropic import FIRST_PARTY, ApiKeyAuth
from gateway.providers.bedrock import BEDROCK, AwsAuth
from gateway.providers.vertex import VERTEX, VertexAuth
from gateway.providers.wire import (
    MessagesProvider,
    WireProfile,
    build_async_client,
    build_client,
)
from gateway.providers.wire._direct import AsyncDirectPost, DirectPost
from gateway.providers.wire._sdk import NO_SDK_TRACING
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.providers.test_lean_leg import ALL, _sent

KEY = "sk-ant-direct"
TIMEOUT = httpx2.Timeout(5.0)


def _pair(
    base_url: str, profile: WireProfile = FIRST_PARTY, **options: Any
) -> tuple[MessagesProvider, MessagesProvider]:
    lean = MessagesProvider(profile, ApiKeyAuth(KEY), base_url=base_url, **options)
    # The same transport with no lean leg: every body through the SDK's create().
    through_create = MessagesProvider(
        dataclasses.replace(profile, messages_path=None),
        ApiKeyAuth(KEY),
        base_url=base_url,
        **options,
    )
    return lean, through_create


def test_anthropics_own_api_posts_directly_and_clients_that_prepare_requests_do_not() -> None:
    clients = {
        "anthropic": (FIRST_PARTY, ApiKeyAuth(KEY)),
        "bedrock": (BEDROCK, AwsAuth(region="us-east-1")),
        "vertex": (VERTEX, VertexAuth(project="p", region="us-east5", access_token="t")),
    }
    direct = {}
    for name, (profile, auth) in clients.items():
        options: dict[str, Any] = {"base_url": "http://127.0.0.1:9", "timeout": TIMEOUT}
        direct[name] = (
            DirectPost.for_client(build_client(profile, auth, **options)) is not None,
            AsyncDirectPost.for_client(build_async_client(profile, auth, **options)) is not None,
        )
    assert direct == {
        "anthropic": (True, True),
        "bedrock": (False, False),
        "vertex": (False, False),
    }


class OwnOptions(anthropic.Anthropic):
    """A client that could change a request's headers per request (as Foundry's, minting an
    Azure AD token in ``_prepare_options``, does)."""

    def _prepare_options(self, options: Any) -> Any:
        return super()._prepare_options(options)


class AsyncOwnOptions(anthropic.AsyncAnthropic):
    async def _prepare_options(self, options: Any) -> Any:
        return await super()._prepare_options(options)


def _sdk_client(**options: Any) -> anthropic.Anthropic:
    made: dict[str, Any] = {
        "api_key": KEY,
        "base_url": "http://127.0.0.1:9",
        "max_retries": 0,
        "open_telemetry": NO_SDK_TRACING,
        **options,
    }
    kind = made.pop("kind", anthropic.Anthropic)
    return kind(**made)


@pytest.mark.parametrize(
    "options",
    [
        {"kind": OwnOptions},
        {"max_retries": 2},
        {"middleware": [lambda request, call_next: call_next(request)]},
        {"open_telemetry": {"traces": {"enabled": True}, "propagation": True}},
    ],
    ids=["own _prepare_options", "SDK retries", "middleware", "SDK tracing"],
)
def test_a_client_whose_post_does_more_than_send_once_is_left_to_the_sdk(
    options: dict[str, Any],
) -> None:
    assert DirectPost.for_client(_sdk_client()) is not None  # the same, plainly built
    assert DirectPost.for_client(_sdk_client(**options)) is None


def test_an_sdk_error_raised_in_the_send_keeps_its_own_cause() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        try:
            raise ValueError("the cause")
        except ValueError as exc:
            raise anthropic.APIConnectionError(request=request) from exc

    client = _sdk_client(http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    direct = DirectPost.for_client(client)
    assert direct is not None
    with (
        pytest.raises(anthropic.APIConnectionError) as caught,
        direct.open("/v1/messages", b"{}", {}, TIMEOUT),
    ):
        pass
    assert type(caught.value.__cause__) is ValueError


def test_a_client_left_to_the_sdk_still_sends_what_create_sent(fake_api: FakeMessagesAPI) -> None:
    # The lean leg through the SDK's post (the direct post's fallback), against create().
    own = dataclasses.replace(FIRST_PARTY, sync_client=OwnOptions, async_client=AsyncOwnOptions)
    lean, through_create = _pair(fake_api.base_url, own)

    async def run() -> None:
        try:
            for provider in (lean, through_create):
                provider.send(ALL["framework"], api_version="2023-06-01", on_attempt_failed=print)
                await provider.asend(
                    ALL["framework"], api_version="2023-06-01", on_attempt_failed=print
                )
        finally:
            await lean.aclose()
            await through_create.aclose()

    asyncio.run(run())
    lean_sync, lean_async, create_sync, create_async = fake_api.requests
    assert _whole(lean_sync) == _whole(create_sync)
    assert _whole(lean_async) == _whole(create_async)


def _whole(request: Any) -> tuple[str, str, dict[str, str], bytes]:
    """Everything the upstream received of a request, every header included."""
    return request.method, request.path, dict(request.headers), request.body


@pytest.mark.parametrize("name", list(ALL))
def test_the_direct_post_sends_what_create_sent_and_records_what_was_received(
    name: str, fake_api: FakeMessagesAPI
) -> None:
    body = ALL[name]
    direct, through_create = _pair(fake_api.base_url)
    told: list[bytes] = []

    async def on_wire(wire: bytes, **_: object) -> None:
        told.append(wire)

    async def run() -> list[Any]:
        try:
            # Three call shapes: two versions, and a per-call timeout (600 and 600.0 are two:
            # the SDK writes the timeout into its headers as given).
            shapes = [("2023-06-01", None), ("2026-10-21", 600), ("2026-10-21", 600.0)]
            replies = [
                await provider.asend(
                    body,
                    api_version=version,
                    on_attempt_failed=print,
                    on_wire=on_wire,
                    timeout_s=timeout_s,
                )
                for version, timeout_s in shapes
                for provider in (direct, through_create)
            ]
            streamed = [
                item
                async for item in direct.astream(
                    body, api_version="2023-06-01", on_attempt_failed=print
                )
                if not isinstance(item, dict)
            ]
            return [*replies, streamed[-1]]
        finally:
            await direct.aclose()
            await through_create.aclose()

    replies = asyncio.run(run())
    sent = fake_api.requests
    for first, second in zip(sent[0:6:2], sent[1:6:2], strict=True):
        assert _whole(first) == _whole(second)  # every header and byte
    assert [r.headers["anthropic-version"] for r in sent[0:6:2]] == [
        "2023-06-01",
        "2026-10-21",
        "2026-10-21",
    ]
    assert [r.headers["x-stainless-timeout"] for r in sent[0:6:2]] == ["600.0", "600", "600.0"]
    assert told == [r.body for r in sent[:6]] == [r.request_bytes for r in replies[:6]]
    assert replies[6].request_bytes == sent[6].body
    assert _sent(sent[6])[2] == {**_sent(sent[0])[2], "content-length": str(len(sent[6].body))}


@pytest.mark.parametrize(
    "script",
    [
        (Reply.error(400, message="max_tokens: bad"),),
        (Reply.error(401, message="invalid x-api-key"),),
        (Reply.error(404, message="model: not found"),),
        (Reply.redirect(307, "http://127.0.0.1:9/v1/messages"),),
        (Reply.drop(), Reply.drop()),
        (Reply.slow(2.0), Reply.slow(2.0)),
    ],
    ids=["400", "401", "404", "redirect", "dropped", "timed out"],
)
def test_a_failure_through_the_direct_post_reads_as_through_create(
    script: tuple[Reply, ...], fake_api: FakeMessagesAPI
) -> None:
    direct, through_create = _pair(fake_api.base_url, max_attempts=2, backoff_base_s=0.01)

    def facts(error: GatewayError, reports: list[Any]) -> tuple[Any, ...]:
        told = (str(error), [r.model_dump(exclude={"latency_ms"}) for r in reports])
        # The fake numbers its answers: the calls differ by their upstream request ids.
        return type(error), type(error.__cause__), re.sub(r"req_fake_\d+", "req_fake", repr(told))

    def failure(provider: MessagesProvider) -> tuple[Any, ...]:
        reports: list[Any] = []
        fake_api.script(*script)
        with pytest.raises(GatewayError) as caught:
            provider.send(
                ALL["plain"],
                api_version="2023-06-01",
                on_attempt_failed=reports.append,
                timeout_s=0.5,
            )
        return facts(caught.value, reports)

    async def afailure(provider: MessagesProvider) -> tuple[Any, ...]:
        reports: list[Any] = []
        fake_api.script(*script)
        with pytest.raises(GatewayError) as caught:
            await provider.asend(
                ALL["plain"],
                api_version="2023-06-01",
                on_attempt_failed=reports.append,
                timeout_s=0.5,
            )
        return facts(caught.value, reports)

    async def run() -> list[tuple[Any, ...]]:
        try:
            return [await afailure(direct), await afailure(through_create)]
        finally:
            await direct.aclose()
            await through_create.aclose()

    sync = [failure(direct), failure(through_create)]
    assert asyncio.run(run()) == sync
    assert sync[0] == sync[1]


def test_an_opened_answer_is_closed_when_its_call_ends_read_or_not(
    fake_api: FakeMessagesAPI,
) -> None:
    # An answer left open would hold its connection: the pool would run dry under load.
    client = _sdk_client(base_url=fake_api.base_url)
    direct = DirectPost.for_client(client)
    aclient = _sdk_client(base_url=fake_api.base_url, kind=anthropic.AsyncAnthropic)
    adirect = AsyncDirectPost.for_client(aclient)
    assert direct is not None and adirect is not None
    headers = {"anthropic-version": "2023-06-01"}
    body = b'{"max_tokens":8,"messages":[],"model":"claude-sonnet-4-6"}'
    with direct.open("/v1/messages", body, headers, TIMEOUT) as opened:
        assert not opened.http_response.is_closed
    answers = [opened.http_response]

    async def run() -> None:
        async with adirect.open("/v1/messages", body, headers, TIMEOUT) as aopened:
            assert not aopened.http_response.is_closed
        answers.append(aopened.http_response)
        await aclient.close()

    asyncio.run(run())
    client.close()
    assert [answer.is_closed for answer in answers] == [True, True]
