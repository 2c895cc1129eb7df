"""The async SDK client's HTTP transport: aiohttp when the SDK's ``aiohttp`` extra is there.

    http = async_http_client({"request": [strip_headers, announce_wire]})
    anthropic.AsyncAnthropic(..., http_client=http)
    cause_name(exc)   # "RemoteProtocolError" for a dropped answer, from either transport

aiohttp does the socket work and the HTTP/1.1 parsing in C: about 220 us less CPU per upstream
call than httpcore/h11 (bench/results/server.md), the largest single part of what `gateway
serve` spends per request. Everything above the transport stays httpx2's client: the SDK builds
the request, the request hooks (header strip, ``on_wire``) run on the finished request before
the transport sees it, proxy mounts come from the environment (``trust_env``), and the SDK's
default timeout and limits apply: the transport maps read and connect timeouts onto aiohttp's
per request and ``max_connections`` onto its connector's limit. What the vendored transport
leaves out of the SDK's own transport is put back here: TCP keepalive probes on each connection
(a long non-streaming call is silent for minutes, and a NAT or load balancer in between drops
an idle flow without them), no limit when ``max_connections`` is ``None``, and no cookie jar
(aiohttp's would add a ``Cookie`` header below the hook that strips headers), and a write
timeout: aiohttp has none (its read timeout starts once the body is written), so an upstream
that accepts the connection and never reads a large body would hold the call for ever. The
request's body must be written within its httpx ``write`` timeout, as httpx's transport bounds
its ``sendall``; past it the attempt fails as a timeout (``httpx2.TimeoutException``, the SDK's
``APITimeoutError``), as the sync client's ``WriteTimeout`` does.
Without aiohttp, the same call gives httpx's own transport.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "AIOHTTP_TRANSPORT",
    "AsyncHooks",
    "async_http_client",
    "cause_name",
    "keepalive_socket",
    "note_write_timeout",
]

AsyncHooks = list[Callable[[httpx2.Request], Awaitable[None]]]


def _aiohttp_transport() -> type[Any] | None:
    """The SDK's vendored httpx-aiohttp transport, or ``None`` when aiohttp cannot be imported
    (the SDK's own check: its ``DefaultAioHttpClient`` is then a stand-in that raises)."""
    try:
        from anthropic._vendor.httpx_aiohttp import transport
    except (ImportError, AttributeError):
        return None
    aiohttp_transport: type[Any] = transport.AiohttpTransport
    return aiohttp_transport


AIOHTTP_TRANSPORT = _aiohttp_transport()


def _keepalive_options() -> list[tuple[int, int, int]]:
    # The SDK's httpx transport's options (anthropic._base_client): probe after 60 s idle,
    # every 60 s, give up after 5.
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    interval = getattr(socket, "TCP_KEEPINTVL", None)
    if interval is not None:
        options.append((socket.IPPROTO_TCP, interval, 60))
    elif sys.platform == "darwin":
        options.append((socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPALIVE", 0x10), 60))
    count = getattr(socket, "TCP_KEEPCNT", None)
    if count is not None:
        options.append((socket.IPPROTO_TCP, count, 5))
    idle = getattr(socket, "TCP_KEEPIDLE", None)
    if idle is not None:
        options.append((socket.IPPROTO_TCP, idle, 60))
    return options


_KEEPALIVE = tuple(_keepalive_options())


def keepalive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket for one of the resolver's addresses, with the keepalive probes set (aiohttp's
    ``socket_factory``: it makes the socket non-blocking and connects it)."""
    family, kind, proto = addr_info[0], addr_info[1], addr_info[2]
    sock = socket.socket(family=family, type=kind, proto=proto)
    for level, option, value in _KEEPALIVE:
        sock.setsockopt(level, option, value)
    return sock


# The write timeout of the request being sent, from its httpx ``timeout`` extension: set by a
# request hook (the last one, so on the finished request) in the task that then enters the
# transport, and read where aiohttp builds its request, in that same task.
_WRITE_TIMEOUT: ContextVar[float | None] = ContextVar("gateway_write_timeout", default=None)


async def note_write_timeout(request: httpx2.Request) -> None:
    """Request hook: the write timeout the aiohttp request's body must be written within."""
    timeout = request.extensions.get("timeout")
    write = timeout.get("write") if isinstance(timeout, Mapping) else None
    _WRITE_TIMEOUT.set(write if isinstance(write, int | float) and write > 0 else None)


@cache
def _write_timed_request() -> type[Any]:
    # Built on first use: aiohttp is imported only where the transport is aiohttp's.
    import aiohttp

    class WriteTimeoutError(aiohttp.ServerTimeoutError):
        """A ServerTimeoutError, which the SDK's vendored map makes httpx2.TimeoutException
        (the SDK's APITimeoutError): the timeout the sync client records, not a failed
        connect."""

    def timed_out(protocol: Any) -> None:
        protocol.set_exception(WriteTimeoutError("the request body was not written in time"))
        # Aborted, not closed: a close waits for the unsent buffer to drain, and the peer
        # that stopped reading would keep the socket open until the process ends.
        transport = protocol.transport
        if transport is not None:
            transport.abort()

    class WriteTimedRequest(aiohttp.ClientRequest):
        """aiohttp's request, its body written within the write timeout: past it the
        connection's protocol fails the wait for the response with a timeout, as aiohttp's
        read timeout does (aiohttp then closes the connection and cancels the stalled write)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.write_timeout_s = _WRITE_TIMEOUT.get()

        async def write_bytes(self, writer: Any, conn: Any, *args: Any, **kwargs: Any) -> None:
            protocol = conn.protocol
            limit = self.write_timeout_s
            timer = None
            if limit is not None and protocol is not None:
                timer = asyncio.get_running_loop().call_later(limit, timed_out, protocol)
            try:
                await super().write_bytes(writer, conn, *args, **kwargs)
            finally:
                if timer is not None:
                    timer.cancel()

    return WriteTimedRequest


def _session(transport: Any) -> aiohttp.ClientSession:
    # Built on the transport's first request, inside the running loop (an aiohttp session is
    # bound to the loop it was made in), with what the vendored transport's own session has.
    import aiohttp

    limits: httpx2.Limits = transport.limits
    connector = aiohttp.TCPConnector(
        keepalive_timeout=limits.keepalive_expiry,
        ssl=transport.ssl_context,
        limit=limits.max_connections or 0,  # 0: no limit, as httpx2's None
        socket_factory=keepalive_socket,
    )
    # No cookie jar: aiohttp's default one would send a cookie the upstream set (a CDN's, say)
    # on later requests, a header added below the hook that strips what the gateway did not
    # choose (httpx's client adds its cookies before the hook, which strips them).
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        request_class=_write_timed_request(),
    )


def _with_keepalive(transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
    if (
        AIOHTTP_TRANSPORT is not None
        and isinstance(transport, AIOHTTP_TRANSPORT)
        and transport.client is None  # a session of its own: left as given
        and not transport.uds
    ):
        transport.client = partial(_session, transport)
    return transport


class _AioHttpClient(anthropic.DefaultAioHttpClient):
    """The SDK's aiohttp client; each transport it makes (the default one, one per proxy
    mount) opens its connections with the keepalive probes."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _with_keepalive(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _with_keepalive(super()._init_proxy_transport(*args, **kwargs))


def async_http_client(event_hooks: Mapping[str, AsyncHooks]) -> httpx2.AsyncClient:
    """The async SDK clients' HTTP client (the one place that chooses the transport)."""
    hooks = {name: list(chain) for name, chain in event_hooks.items()}
    # No redirects, as the sync client (gateway.providers.wire._sdk.build_client) says why.
    if AIOHTTP_TRANSPORT is None:
        return anthropic.DefaultAsyncHttpxClient(event_hooks=hooks, follow_redirects=False)
    # Last, so it reads the finished request's timeout just before the transport runs.
    hooks.setdefault("request", []).append(note_write_timeout)
    return _AioHttpClient(event_hooks=hooks, follow_redirects=False)


# The SDK's vendored map names aiohttp's errors by their aiohttp base class: a peer that closed
# before answering becomes ConnectError, a body cut short ReadError. httpx's own transport (the
# sync client's) calls both RemoteProtocolError. A failure names the httpx2 error that httpx's
# transport raises for the same event, so it reads the same from either client (the sync and
# async twins record the same attempts), and a dropped answer is not called a failed connect.
_AIOHTTP_AS_HTTPX = {
    "ServerDisconnectedError": "RemoteProtocolError",  # closed with no (complete) response
    "ClientPayloadError": "RemoteProtocolError",  # content-length or chunking cut short
}


def cause_name(exc: BaseException) -> str:
    """The class name a transport failure is described by (never any of its text)."""
    inner = exc.__cause__
    if inner is not None and type(inner).__module__.startswith("aiohttp."):
        for klass in type(inner).__mro__:
            if klass.__name__ in _AIOHTTP_AS_HTTPX:
                return _AIOHTTP_AS_HTTPX[klass.__name__]
    return type(exc).__name__
