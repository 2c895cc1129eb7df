"""A stream's events and its failure do not depend on how the upstream's bytes were cut.

The upstream here is a real loopback HTTP server that writes its whole answer (status line,
headers and an event stream that breaks off with an ``error`` event) in one ``sendall``, as
a busy machine's socket often hands it over in one read. The events before the error are
delivered, in order, and then the error: an attempt whose events reached the caller is never
retried, whether they came in the error's chunk or an earlier one.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.errors import UpstreamUnavailable
from gateway.providers.anthropic import AnthropicProvider, AttemptFailure

BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "A transaction"}],
}


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _answer() -> bytes:
    message = {
        "id": "msg_one_write",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    events = [
        _sse("message_start", {"type": "message_start", "message": message}),
        _sse("content_block_start", block),
        *(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": w},
                },
            )
            for w in ("never ", "finished")
        ),
        _sse(
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    ]
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nrequest-id: req_one_write\r\n"
        b"connection: close\r\n\r\n"
    )
    return head + b"".join(events)


class OneWriteUpstream:
    """Answers every request with :func:`_answer` in a single write, then closes."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.requests = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _addr = self.listener.accept()
            except OSError:
                return
            with conn:
                received = b""
                while b"\r\n\r\n" not in received:
                    received += conn.recv(65536)
                head, _, body = received.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                conn.sendall(_answer())

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def upstream() -> Iterator[OneWriteUpstream]:
    server = OneWriteUpstream()
    yield server
    server.close()


def _provider(upstream: OneWriteUpstream) -> AnthropicProvider:
    return AnthropicProvider(
        api_key="sk-ant-test-one-write",
        base_url=upstream.base_url,
        sleep=lambda _s: None,
        async_sleep=_no_wait,
    )


async def _no_wait(_seconds: float) -> None:
    return None


def test_events_before_an_error_in_the_same_chunk_are_delivered_then_the_error(
    upstream: OneWriteUpstream,
) -> None:
    provider = _provider(upstream)
    failures: list[AttemptFailure] = []
    seen: list[str] = []
    try:
        with pytest.raises(UpstreamUnavailable) as failed:
            for item in provider.stream(
                BODY, api_version="2023-06-01", on_attempt_failed=failures.append
            ):
                assert isinstance(item, dict)
                seen.append(str(item["type"]))
    finally:
        provider.close()
    assert seen == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
    ]
    assert failed.value.error_type == "overloaded_error"
    assert upstream.requests == 1  # delivered events: not retried
    assert [f.will_retry for f in failures] == [False]


def test_the_async_stream_delivers_them_too(upstream: OneWriteUpstream) -> None:
    async def run() -> list[str]:
        provider = _provider(upstream)
        seen: list[str] = []
        try:
            with pytest.raises(UpstreamUnavailable):
                async for item in provider.astream(
                    BODY, api_version="2023-06-01", on_attempt_failed=lambda _f: None
                ):
                    assert isinstance(item, dict)
                    seen.append(str(item["type"]))
        finally:
            await provider.aclose()
        return seen

    assert asyncio.run(run())[-1] == "content_block_delta"
    assert upstream.requests == 1
