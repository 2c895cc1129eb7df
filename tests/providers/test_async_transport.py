"""The async provider sends through aiohttp's transport (the SDK's ``aiohttp`` extra), with
everything above the transport as with httpx's: the request hooks see the exact bytes that
reach the upstream, proxies come from the environment, and without aiohttp the same code
sends through httpx's own transport."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import UpstreamError
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.base import AttemptFailure
from tests.fakes.messages_api import FakeMessagesAPI, Reply

ROOT = Path(__file__).resolve().parents[2]
API_VERSION = "2023-06-01"
BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 32,
    "messages": [{"role": "user", "content": "Transaction 4711: clear or hold? Ünïcode ✓"}],
    "temperature": 0.0,
}


def _transport_of(provider: AnthropicProvider) -> str:
    # The SDK keeps its HTTP client as ``_client`` and httpx2 its default transport as
    # ``_transport``: there is no public way to ask which transport a client sends with.
    http = provider._async_client()._client
    transport = type(http._transport)
    return f"{transport.__module__}.{transport.__qualname__}"


def _refuse(report: AttemptFailure) -> None:
    raise AssertionError(f"no attempt should fail: {report.message}")


def test_the_async_provider_sends_through_aiohttp_and_announces_the_bytes_received() -> None:
    with FakeMessagesAPI() as fake:
        provider = AnthropicProvider(api_key="sk-test-transport", base_url=fake.base_url)
        announced: list[bytes] = []

        async def on_wire(content: bytes) -> None:
            announced.append(content)

        async def main() -> None:
            try:
                reply = await provider.asend(
                    BODY, api_version=API_VERSION, on_attempt_failed=_refuse, on_wire=on_wire
                )
                assert reply.request_bytes == fake.requests[0].body
            finally:
                await provider.aclose()

        assert _transport_of(provider).endswith("httpx_aiohttp.transport.AiohttpTransport")
        asyncio.run(main())

    assert announced == [fake.requests[0].body]  # what was recorded is what arrived
    assert json.loads(announced[0]) == BODY


def test_a_stream_through_aiohttp_announces_its_bytes_and_closes_early_on_request() -> None:
    with FakeMessagesAPI() as fake:
        fake.script(Reply.stream("word " * 50, deltas=50, delay=0.02))
        provider = AnthropicProvider(api_key="sk-test-transport", base_url=fake.base_url)
        announced: list[bytes] = []

        async def main() -> int:
            seen = 0
            try:
                stream = provider.astream(
                    BODY,
                    api_version=API_VERSION,
                    on_attempt_failed=_refuse,
                    on_wire=announced.append,
                )
                async for item in stream:
                    if isinstance(item, dict) and item.get("type") == "content_block_delta":
                        seen += 1
                        if seen == 3:
                            break
                await stream.aclose()  # type: ignore[attr-defined]
            finally:
                await provider.aclose()
            return seen

        assert asyncio.run(main()) == 3
        assert announced == [fake.requests[0].body]
        assert fake.stream_closed(1) is True  # closing the iterator closed the connection


def test_the_async_provider_takes_its_proxy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fake stands in for the proxy: a request sent through a proxy names the whole URL.
    with FakeMessagesAPI() as proxy:
        proxy.script(Reply.ok(text="via the proxy"))
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        provider = AnthropicProvider(
            api_key="sk-test-transport", base_url="http://upstream.invalid"
        )

        async def main() -> None:
            try:
                await provider.asend(BODY, api_version=API_VERSION, on_attempt_failed=_refuse)
            except Exception:  # noqa: S110 - the fake answers 404 to a proxied path
                pass
            finally:
                await provider.aclose()

        asyncio.run(main())
        assert [r.path for r in proxy.requests] == ["http://upstream.invalid/v1/messages"]


_WITHOUT_AIOHTTP = """
import asyncio, json, sys
sys.modules["aiohttp"] = None  # as if the extra were not installed: importing it fails
from gateway.errors import UpstreamError
from gateway.providers.anthropic import AnthropicProvider

async def main():
    provider = AnthropicProvider(api_key="sk-test-transport", base_url=sys.argv[1])
    seen = []
    reply = await provider.asend(json.loads(sys.argv[2]), api_version="2023-06-01",
        on_attempt_failed=print, on_wire=seen.append)
    transport = type(provider._async_client()._client._transport)
    await provider.aclose()
    print(json.dumps({"transport": transport.__module__, "announced": seen[0].decode(),
        "text": reply.response["content"][0]["text"]}))

asyncio.run(main())
"""


@pytest.mark.slow  # a process without aiohttp
def test_without_aiohttp_the_async_provider_sends_through_httpx() -> None:
    with FakeMessagesAPI() as fake:
        fake.script(Reply.ok(text="through httpx"))
        done = subprocess.run(
            [sys.executable, "-c", _WITHOUT_AIOHTTP, fake.base_url, json.dumps(BODY)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        assert outcome["transport"].split(".")[0] == "httpx2"  # its own transport
        assert outcome["announced"].encode() == fake.requests[0].body
        assert outcome["text"] == "through httpx"


def _client_timers(server_port: int) -> list[str]:
    """The kernel's timer kind of each established connection to ``server_port`` from this
    machine (/proc/net/tcp "tr": 0 none, 1 retransmit, 2 keepalive)."""
    timers = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == server_port and fields[3] == "01":  # ESTABLISHED
                timers.append(fields[5].split(":")[0])
    return timers


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net/tcp")
def test_the_async_provider_s_connections_send_tcp_keepalive_probes() -> None:
    # A long non-streaming call is silent for minutes; without probes a NAT or load balancer
    # in between drops the idle flow and the call hangs until its read timeout.
    with FakeMessagesAPI() as fake:
        port = int(fake.base_url.rstrip("/").rsplit(":", 1)[1])
        provider = AnthropicProvider(api_key="sk-test-transport", base_url=fake.base_url)

        async def main() -> list[str]:
            try:
                await provider.asend(BODY, api_version=API_VERSION, on_attempt_failed=_refuse)
                return _client_timers(port)  # the connection is kept open for the next call
            finally:
                await provider.aclose()

        assert asyncio.run(main()) == ["02"]


def test_a_silent_upstream_times_out_through_aiohttp_and_is_retried() -> None:
    failures: list[AttemptFailure] = []
    with FakeMessagesAPI() as fake:
        fake.script(Reply.slow(5.0))
        provider = AnthropicProvider(
            api_key="sk-test-transport", base_url=fake.base_url, timeout_s=0.3, backoff_base_s=0.01
        )

        async def main() -> int:
            try:
                reply = await provider.asend(
                    BODY, api_version=API_VERSION, on_attempt_failed=failures.append
                )
                return reply.attempts
            finally:
                await provider.aclose()

        assert asyncio.run(main()) == 2
    [failure] = failures
    assert failure.error_type == "timeout" and failure.will_retry
    assert 250 <= failure.latency_ms < 3000


def _comparable(report: AttemptFailure) -> tuple[object, ...]:
    message = report.message.replace(str(report.upstream_request_id), "<id>")
    return (report.status, report.error_type, report.will_retry, message)


def test_a_stream_that_stalls_mid_answer_fails_alike_from_both_transports() -> None:
    # The sync provider sends through httpx's transport, the async one through aiohttp's: a
    # read time-out after the first events is the same failed attempt from both.
    sync_failures: list[AttemptFailure] = []
    async_failures: list[AttemptFailure] = []
    with FakeMessagesAPI() as fake:
        fake.set_default(lambda _request: Reply.stream("word " * 6, deltas=6, delay=1.5))
        provider = AnthropicProvider(
            api_key="sk-test-transport", base_url=fake.base_url, timeout_s=0.5
        )
        stream_body = {**BODY, "stream": True}

        async def main() -> None:
            async for _ in provider.astream(
                stream_body, api_version=API_VERSION, on_attempt_failed=async_failures.append
            ):
                pass

        try:
            with pytest.raises(UpstreamError) as sync_caught:
                for _ in provider.stream(
                    stream_body, api_version=API_VERSION, on_attempt_failed=sync_failures.append
                ):
                    pass
            with pytest.raises(UpstreamError) as async_caught:
                asyncio.run(main())
        finally:
            asyncio.run(provider.aclose())
    assert [_comparable(r) for r in async_failures] == [_comparable(r) for r in sync_failures]
    assert [r.error_type for r in sync_failures] == ["truncated_response"]
    assert sync_failures[0].message.endswith("(ReadTimeout)")
    assert type(async_caught.value) is type(sync_caught.value)


def test_a_cookie_the_upstream_sets_is_never_sent_back() -> None:
    # Only the headers the gateway chose go out: the request hook strips the rest, and the
    # transport below it must not add any (aiohttp's session keeps a cookie jar by default,
    # which accepts cookies from a host name, not from an IP address).
    with FakeMessagesAPI() as fake:
        fake.script(Reply.ok(headers=(("set-cookie", "__cf_bm=tracking; Path=/; HttpOnly"),)))
        by_name = fake.base_url.replace("127.0.0.1", "localhost")
        provider = AnthropicProvider(api_key="sk-test-transport", base_url=by_name)

        async def main() -> None:
            try:
                for _ in range(2):
                    await provider.asend(BODY, api_version=API_VERSION, on_attempt_failed=_refuse)
            finally:
                await provider.aclose()

        asyncio.run(main())
        assert [r.headers.get("cookie") for r in fake.requests] == [None, None]
