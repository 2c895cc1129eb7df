"""An upstream that accepts the connection and never reads the request body: the call gives
up within the configured upstream timeout, sync (httpx) and async (aiohttp) alike, each
attempt recorded as a timeout and the request FAILED, the same error raised to the caller."""

from __future__ import annotations

import asyncio
import base64
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway import AsyncGateway, Gateway, Settings
from gateway.errors import UpstreamUnavailable
from tests.gateway.conftest import API_KEY, events

pytestmark = pytest.mark.slow  # waits out upstream time-outs, on 16 MB bodies

TIMEOUT_S = 2.0
ATTEMPTS = 2
# More than loopback's socket buffers hold on both sides, so the write must stall. The policy
# copy is allowed a document this large (the shipped one stops at 10 MB).
DOCUMENT = b"%PDF-1.7\n" + b"0" * (16 << 20)


class SilentUpstream:
    """A TCP server on loopback that accepts every connection and never reads from it."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self._accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}"

    @property
    def connections(self) -> int:
        return len(self._accepted)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            # A small receive buffer, so the client's writes stall sooner.
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            self._accepted.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()
        for conn in self._accepted:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentUpstream]:
    upstream = SilentUpstream()
    yield upstream
    upstream.close()


def _settings(policy_dir: Path, db_path: Path, base_url: str) -> Settings:
    policy = policy_dir / "prospectus_summary.toml"
    text = policy.read_text()
    policy.write_text(re.sub(r"max_bytes = [0-9_]+", "max_bytes = 40_000_000", text))
    return Settings(
        policy_dir=policy_dir,
        database_url=f"sqlite:///{db_path}",
        anthropic_api_key=API_KEY,
        anthropic_base_url=base_url,
        durability="os",
        retry_backoff_base_s=0.01,
        default_caller="tests",
        request_timeout_s=TIMEOUT_S,
        max_attempts=ATTEMPTS,
    )


def _messages() -> list[dict[str, Any]]:
    source = {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(DOCUMENT).decode(),
    }
    document = {"type": "document", "source": source, "title": "Prospectus"}
    return [{"role": "user", "content": [document, {"type": "text", "text": "Summarise."}]}]


def _outcome(db_path: Path) -> list[tuple[str, Any]]:
    """Each event's kind with its error type (none for the REQUEST)."""
    return [(str(e.kind), e.data.get("error_type")) for e in events(db_path)]


EXPECTED = [
    ("request", None),
    ("attempt_failed", "timeout"),
    ("attempt_failed", "timeout"),
    ("failed", "timeout"),
]
# A hang test, not a speed test: the bound is generous, a hang would be minutes.
BOUND_S = ATTEMPTS * TIMEOUT_S + 10.0


def test_sync_call_gives_up_on_an_upstream_that_never_reads(
    policy_dir: Path, db_path: Path, silent: SilentUpstream
) -> None:
    with Gateway(_settings(policy_dir, db_path, silent.base_url)) as gw:
        started = time.monotonic()
        with pytest.raises(UpstreamUnavailable, match="timeout"):
            gw.complete("prospectus_summary", messages=_messages())
        elapsed = time.monotonic() - started
    assert elapsed < BOUND_S
    assert silent.connections == ATTEMPTS
    assert _outcome(db_path) == EXPECTED


def test_async_call_gives_up_on_an_upstream_that_never_reads(
    policy_dir: Path, db_path: Path, silent: SilentUpstream
) -> None:
    async def run() -> float:
        async with AsyncGateway(_settings(policy_dir, db_path, silent.base_url)) as gw:
            started = time.monotonic()
            with pytest.raises(UpstreamUnavailable, match="timeout"):
                # The outer bound only turns a hang into a failure; the gateway must give up
                # well before it.
                await asyncio.wait_for(
                    gw.complete("prospectus_summary", messages=_messages()), timeout=BOUND_S + 30
                )
            return time.monotonic() - started

    elapsed = asyncio.run(run())
    assert elapsed < BOUND_S
    assert silent.connections == ATTEMPTS
    assert _outcome(db_path) == EXPECTED
