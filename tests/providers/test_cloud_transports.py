"""Claude on Bedrock and on Vertex AI, through the SDK's own cloud clients and real sockets, at
loopback fakes of the cloud endpoints (tests/fakes/cloud_apis.py) with static test credentials.

For each transport: the body the gateway is told before sending (``on_wire``) is the body the
endpoint received, byte for byte, with the transport's own ``anthropic_version``, and the
capture gives the same bytes without sending; the model id travels in the URL, and
``on_wire`` is told that URL and the region; the answer names the transport's model id; Vertex
counts tokens, Bedrock refuses to before sending; a streamed answer
(AWS event-stream framing on Bedrock, SSE on Vertex) assembles; the transport's throttling is
retried as a rate limit; and no credential or signature is in what is recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.errors import UpstreamRejected, UpstreamUnavailable
from gateway.providers.base import AttemptFailure, ProviderReply, RequestNotHonoured, WireTarget
from gateway.providers.bedrock import BedrockProvider
from gateway.providers.vertex import VertexProvider
from gateway.providers.wire import MessagesProvider
from tests.fakes.cloud_apis import VERSIONS, CloudReply, FakeBedrock, FakeVertex
from tests.fakes.cloud_auth import AWS_KEY_ID, AWS_SECRET, GOOGLE_TOKEN

pytestmark = pytest.mark.usefixtures("aws_credentials")  # botocore finds the static test key

REGION = "eu-central-1"
PROMPT = "Transaction 4711: wire 9,800 EUR to account DE89 3704 0044 0532 0130 00"
MODEL_IDS = {"bedrock": "eu.anthropic.claude-sonnet-4-6", "vertex": "claude-sonnet-4-6"}


Transport = tuple[str, Any, MessagesProvider]


@pytest.fixture(params=["bedrock", "vertex"])
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    name = request.param
    no_wait = {"sleep": lambda _s: None, "async_sleep": _no_async_wait}
    if name == "bedrock":
        with FakeBedrock(region=REGION) as fake:
            provider: MessagesProvider = BedrockProvider(
                region=REGION, base_url=fake.base_url, **no_wait
            )
            yield name, fake, provider
            provider.close()
    else:
        with FakeVertex(token=GOOGLE_TOKEN) as fake:
            provider = VertexProvider(
                project="bank-risk",
                region="europe-west1",
                access_token=GOOGLE_TOKEN,
                base_url=f"{fake.base_url}/v1",
                **no_wait,
            )
            yield name, fake, provider
            provider.close()


async def _no_async_wait(_seconds: float) -> None:
    return None


def _body(name: str, **extra: Any) -> dict[str, Any]:
    """A body as the plan makes it for the transport: its API version in the body."""
    return {
        "model": MODEL_IDS[name],
        "max_tokens": 64,
        "messages": [{"role": "user", "content": PROMPT}],
        "anthropic_version": VERSIONS[name],
        **extra,
    }


class Told:
    """An ``on_wire`` that keeps what it is told: the bytes, and where they go."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.targets: list[WireTarget | None] = []

    def __call__(self, wire: bytes, *, target: WireTarget | None = None) -> None:
        self.bodies.append(wire)
        self.targets.append(target)


def _no_secret_in(data: bytes) -> None:
    for secret in (AWS_SECRET, AWS_KEY_ID, GOOGLE_TOKEN):
        assert secret.encode() not in data


def test_plain_call_records_exactly_what_the_endpoint_received(transport: Transport) -> None:
    name, fake, provider = transport
    told = Told()
    body = _body(name)
    reply = provider.send(
        body, api_version=VERSIONS[name], on_attempt_failed=pytest.fail, on_wire=told
    )
    received = fake.requests[-1]
    assert told.bodies == [received.body] and reply.request_bytes == received.body
    assert received.json["anthropic_version"] == VERSIONS[name]  # the transport's, as planned
    (target,) = told.targets
    assert target is not None and target.method == "POST"
    assert target.url == fake.base_url + received.path  # the model id in the URL, as sent
    assert target.region == {"bedrock": REGION, "vertex": "europe-west1"}[name]
    assert provider.wire_bytes(body) == received.body  # the capture agrees, nothing sent
    assert MODEL_IDS[name] in received.path  # the model id is in the URL ...
    assert "model" not in received.json  # ... not in the body
    assert reply.response["model"] == MODEL_IDS[name]
    assert reply.response["content"][0]["type"] == "text"
    _no_secret_in(received.body)
    assert reply.upstream_request_id is not None


def test_stream_assembles_from_the_transports_framing(transport: Transport) -> None:
    name, fake, provider = transport
    told = Told()
    items = list(
        provider.stream(
            _body(name),
            api_version=VERSIONS[name],
            on_attempt_failed=pytest.fail,
            on_wire=told,
        )
    )
    reply = items[-1]
    assert isinstance(reply, ProviderReply) and reply.stream is not None
    events = [i for i in items if isinstance(i, dict)]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    assert reply.response["content"][0]["text"] == "The fake cloud model answers."
    assert reply.response["stop_reason"] == "end_turn"
    received = fake.requests[-1]
    assert told.bodies == [received.body]
    assert "stream" in received.path.lower()  # the streamed operation's URL
    assert told.targets[0] is not None and told.targets[0].url.endswith(received.path)
    # Bedrock takes the stream flag out of the body; Vertex keeps it there as well.
    assert ("stream" in received.json) is (name == "vertex")


def test_a_stream_that_breaks_off_is_not_sent_again(transport: Transport) -> None:
    """An error inside the stream (Bedrock's exception frame, Vertex's error event) after part
    of the answer was delivered ends the call with the typed error, without another attempt."""
    name, fake, provider = transport
    fake.script(CloudReply.fails_mid_stream())
    delivered: list[Any] = []
    with pytest.raises(UpstreamUnavailable, match="broke off") as caught:
        for item in provider.stream(
            _body(name), api_version=VERSIONS[name], on_attempt_failed=list
        ):
            delivered.append(item)
    assert [e["type"] for e in delivered] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ]
    # Bedrock's modelStreamErrorException reads as an upstream fault; Vertex says overloaded.
    assert caught.value.error_type == {"bedrock": "api_error", "vertex": "overloaded_error"}[name]
    assert len(fake.requests) == 1


def test_throttling_is_a_rate_limit_and_retried(transport: Transport) -> None:
    name, fake, provider = transport
    fake.script(CloudReply.throttled(), CloudReply.throttled())
    failures: list[AttemptFailure] = []
    reply = provider.send(
        _body(name), api_version=VERSIONS[name], on_attempt_failed=failures.append
    )
    assert reply.attempts == 3
    assert [f.error_type for f in failures] == ["rate_limit_error", "rate_limit_error"]
    assert all(f.status == 429 and f.will_retry for f in failures)
    assert all(GOOGLE_TOKEN not in (f.upstream_message or "") for f in failures)


def test_async_send_sends_the_same_bytes(transport: Transport) -> None:
    name, fake, provider = transport
    told = Told()
    body = _body(name)

    async def run() -> ProviderReply:
        try:
            return await provider.asend(
                body, api_version=VERSIONS[name], on_attempt_failed=pytest.fail, on_wire=told
            )
        finally:
            await provider.aclose()

    reply = asyncio.run(run())
    assert told.bodies == [fake.requests[-1].body] == [provider.wire_bytes(body)]
    assert told.targets[0] is not None and told.targets[0].url.endswith(fake.requests[-1].path)
    assert reply.response["model"] == MODEL_IDS[name]


def test_vertex_counts_tokens_and_bedrock_refuses_before_sending(transport: Transport) -> None:
    name, fake, provider = transport
    if name == "bedrock":  # InvokeModel has no counting endpoint
        with pytest.raises(RequestNotHonoured, match="does not count tokens"):
            provider.count_tokens(_body(name), api_version=VERSIONS[name])
        assert fake.requests == []
        return
    told = Told()
    counted = provider.count_tokens(_body(name), api_version=VERSIONS[name], on_wire=told)
    (received,) = fake.requests
    assert received.path.endswith("/publishers/anthropic/models/count-tokens:rawPredict")
    assert told.bodies == [received.body]
    assert received.json["model"] == MODEL_IDS[name]  # named in the body on this endpoint
    assert received.json["anthropic_version"] == VERSIONS[name]
    assert "max_tokens" not in received.json  # an output control does not change the count
    assert counted > 0
    _no_secret_in(received.body)


def test_a_body_without_the_transports_version_is_refused_by_the_cloud(
    transport: Transport,
) -> None:
    """The SDK's cloud clients would send the SDK's own API version, which the clouds refuse:
    the version must be the plan's (the fakes refuse as the clouds do)."""
    name, fake, provider = transport
    body = {k: v for k, v in _body(name).items() if k != "anthropic_version"}
    with pytest.raises(UpstreamRejected) as caught:
        provider.send(body, api_version=VERSIONS[name], on_attempt_failed=list)
    assert caught.value.status == 400 and caught.value.error_type == "invalid_request_error"
    assert fake.requests[0].json["anthropic_version"] != VERSIONS[name]


def test_bedrock_signs_for_its_service_and_region() -> None:
    """The fake refuses a request signed for another region: the signature is the SDK's
    (botocore's SigV4), over the headers that reach the wire."""
    with FakeBedrock(region="us-west-2") as fake:
        provider = BedrockProvider(region=REGION, base_url=fake.base_url)
        try:
            with pytest.raises(UpstreamRejected) as caught:
                provider.send(
                    _body("bedrock"), api_version=VERSIONS["bedrock"], on_attempt_failed=list
                )
        finally:
            provider.close()
    assert caught.value.error_type == "permission_error"
    assert "AWS4-HMAC-SHA256" in fake.requests[0].headers["authorization"]


def test_vertex_refuses_without_the_token() -> None:
    with FakeVertex(token="another-token") as fake:
        provider = VertexProvider(
            project="p",
            region="us-east5",
            access_token=GOOGLE_TOKEN,
            base_url=f"{fake.base_url}/v1",
        )
        try:
            with pytest.raises(UpstreamRejected) as caught:
                provider.send(
                    _body("vertex"), api_version=VERSIONS["vertex"], on_attempt_failed=list
                )
        finally:
            provider.close()
    assert caught.value.error_type == "authentication_error"
    assert GOOGLE_TOKEN not in str(caught.value)
