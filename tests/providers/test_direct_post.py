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

import httpx2
import pytest

from gateway.errors import GatewayError
from gateway.providers.anthropic import FIRST_PARTY, ApiKeyAuth
from gateway.providers.bedrock import BEDROCK, AwsAuth
from gateway.providers.vertex import VERTEX, VertexAuth
from gateway.providers.wire import MessagesProvider, build_async_client, build_client
from gateway.providers.wire._direct import AsyncDirectPost, DirectPost
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.providers.test_lean_leg import ALL, _sent

KEY = "sk-ant-direct"
TIMEOUT = httpx2.Timeout(5.0)


def _pair(base_url: str, **options: Any) -> tuple[MessagesProvider, MessagesProvider]:
    direct = MessagesProvider(FIRST_PARTY, ApiKeyAuth(KEY), base_url=base_url, **options)
    # The same transport with no lean leg: every body through the SDK's create().
    through_create = MessagesProvider(
        dataclasses.replace(FIRST_PARTY, messages_path=None),
        ApiKeyAuth(KEY),
        base_url=base_url,
        **options,
    )
    return direct, through_create


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
            replies = [
                await provider.asend(
                    body, api_version=version, on_attempt_failed=print, on_wire=on_wire
                )
                for version in ("2023-06-01", "2026-10-21")  # two call shapes, two header sets
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
    assert _sent(sent[0]) == _sent(sent[1])  # headers and bytes, byte for byte
    assert _sent(sent[2]) == _sent(sent[3])
    assert sent[0].headers["anthropic-version"] == "2023-06-01"
    assert sent[2].headers["anthropic-version"] == "2026-10-21"
    assert told == [r.body for r in sent[:4]] == [r.request_bytes for r in replies[:4]]
    assert replies[4].request_bytes == sent[4].body
    assert _sent(sent[4])[2] == {**_sent(sent[0])[2], "content-length": str(len(sent[4].body))}


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
