"""Slow and idle connections are bounded: headers and bodies that trickle in are cut off at
their time-outs with a 408, and connections past the caps (per worker, per client address)
are answered 503 at once, so that a flood from one address leaves room for other callers.

Bounded in count (a few dozen sockets) and time (time-outs of about a second), loopback only;
another client address is another loopback address (127.0.0.2, ...), all of 127/8 being
the loopback on Linux.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import ServerProcess, running_server

pytestmark = [
    pytest.mark.slow,  # `gateway serve` as a process
    pytest.mark.skipif(sys.platform != "linux", reason="other loopback addresses: Linux"),
]

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.5
PER_PEER = 6
PER_WORKER = 16
CUT_OFF_WITHIN_S = 6.0  # the time-out, and room for a loaded machine


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with (
        FakeMessagesAPI() as fake,
        running_server(
            tmp_path_factory.mktemp("guarded"),
            fake,
            GATEWAY_SERVER_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S),
            GATEWAY_SERVER_BODY_TIMEOUT_S=str(BODY_TIMEOUT_S),
            GATEWAY_SERVER_MAX_CONNECTIONS=str(PER_WORKER),
            GATEWAY_SERVER_MAX_CONNECTIONS_PER_PEER=str(PER_PEER),
        ) as server,
    ):
        yield server


def connect(server: ServerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(CUT_OFF_WITHIN_S)
    sock.connect(("127.0.0.1", server.port))
    return sock


def trickle_until_closed(sock: socket.socket, data: bytes, *, every_s: float = 0.2) -> bytes:
    """Send ``data`` a byte at a time until the server closes; what it answered."""
    sock.setblocking(False)
    answer = b""
    deadline = time.monotonic() + CUT_OFF_WITHIN_S
    sent = 0
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
            if not chunk:
                return answer
            answer += chunk
        except BlockingIOError:
            pass
        except ConnectionResetError:
            return answer
        if sent < len(data):
            try:
                sock.send(data[sent : sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                return answer
            sent += 1
        time.sleep(every_s)
    raise AssertionError(f"still open after {CUT_OFF_WITHIN_S} s (answered {answer[:80]!r})")


def read_until_closed(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def test_a_connection_that_sends_nothing_is_closed_at_the_header_time_out(
    guarded: ServerProcess,
) -> None:
    started = time.monotonic()
    with connect(guarded) as sock:
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408")
    assert HEADER_TIMEOUT_S * 0.8 <= time.monotonic() - started < CUT_OFF_WITHIN_S


def test_headers_sent_a_byte_at_a_time_are_cut_off_at_the_header_time_out(
    guarded: ServerProcess,
) -> None:
    head = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n" + b"x-padding: " + b"a" * 200
    started = time.monotonic()
    with connect(guarded) as sock:
        answer = trickle_until_closed(sock, head)
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"timeout_error" in answer
    assert time.monotonic() - started < HEADER_TIMEOUT_S + 2.0


def test_a_body_sent_a_byte_at_a_time_is_cut_off_at_the_body_time_out(
    guarded: ServerProcess,
) -> None:
    key = guarded.create_key("slow-desk")
    head = (
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"x-api-key: " + key.encode() + b"\r\ncontent-length: 1000\r\n\r\n"
    )
    with connect(guarded) as sock:
        sock.sendall(head)
        started = time.monotonic()
        answer = trickle_until_closed(sock, b"{" + b" " * 999)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert BODY_TIMEOUT_S * 0.8 <= time.monotonic() - started < BODY_TIMEOUT_S + 2.0


def test_a_body_left_unread_by_a_refusal_cannot_hold_the_connection(
    guarded: ServerProcess,
) -> None:
    """No key: the 401 is answered without reading the body; trickling the rest of that
    body still ends at the body time-out."""
    head = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n"
    with connect(guarded) as sock:
        sock.sendall(head)
        started = time.monotonic()
        answer = trickle_until_closed(sock, b" " * 1000)
    assert answer.startswith(b"HTTP/1.1 401")
    assert answer.count(b"HTTP/1.1 ") == 1  # closed, with no second answer after the 401
    assert time.monotonic() - started < BODY_TIMEOUT_S + 2.0


def test_one_address_past_its_cap_is_refused_and_other_callers_are_served(
    guarded: ServerProcess,
) -> None:
    key = guarded.create_key("other-desk")
    flood = [connect(guarded, "127.0.0.1") for _ in range(PER_PEER + 4)]
    try:
        refused = 0
        for sock in flood[PER_PEER:]:
            answer = read_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 503"), answer[:100]
            assert b"overloaded_error" in answer
            refused += 1
        assert refused == 4
        # Another address is not held up by the flood: 15 of 15 answered.
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(transport=transport, timeout=5) as client:
            for n in range(15):
                answer = client.get(f"{guarded.base_url}/v1/models", headers={"x-api-key": key})
                assert answer.status_code == 200, (n, answer.text)
    finally:
        for sock in flood:
            sock.close()


def test_a_worker_past_its_connection_cap_refuses_at_once(guarded: ServerProcess) -> None:
    held = []
    try:
        for n in range(PER_WORKER):  # under the per-peer cap from each address
            sock = connect(guarded, f"127.0.1.{n // (PER_PEER - 1) + 1}")
            # One answered request each: then idle in keep-alive, past the header time-out.
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            held.append(sock)
        started = time.monotonic()
        with connect(guarded, "127.0.2.1") as extra:
            answer = read_until_closed(extra)
        assert answer.startswith(b"HTTP/1.1 503")
        assert time.monotonic() - started < 1.0  # at once, not at a time-out
    finally:
        for sock in held:
            sock.close()


def test_time_outs_and_caps_are_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "server.md").read_text()
    for name in (
        "GATEWAY_SERVER_HEADER_TIMEOUT_S",
        "GATEWAY_SERVER_BODY_TIMEOUT_S",
        "GATEWAY_SERVER_MAX_CONNECTIONS",
        "GATEWAY_SERVER_MAX_CONNECTIONS_PER_PEER",
    ):
        assert name in docs
