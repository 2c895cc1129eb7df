"""uvicorn's HTTP protocol with the limits it lacks: read time-outs and connection caps.

    http = guarded_protocol(ConnectionLimits.from_settings(settings))
    uvicorn.Config(app, http=http, ...)          # one per accepted connection

uvicorn bounds the idle time between two requests on a connection (``timeout_keep_alive``)
and nothing else: a fresh connection that sends nothing, or a request whose headers or body
arrive a byte a minute, is held for ever (each byte re-arms nothing), and every accepted
connection holds a file descriptor until then. An ASGI middleware cannot help: the app is
called only once the headers are in. So the guard sits in the protocol, which sees every
connection from its first byte:

- **header time-out**: the request line and headers must be complete ``header_timeout_s``
  after the connection opened (or, on a kept-alive connection, after the next request's
  first byte); otherwise the server answers 408 and closes the connection;
- **body time-out**: the whole body must be in ``body_timeout_s`` after its headers, read by
  the app or not (a request answered without reading its body, a 401 say, would otherwise
  let the client trickle the rest for ever); 408 if nothing was answered yet, then closed;
- **connection caps**: at most ``max_connections`` open connections per worker and
  ``max_connections_per_peer`` from one client address. A connection over either cap is
  answered 503 ``overloaded_error`` at once (the SDKs retry it) and closed before anything
  of it is read, so it costs its descriptor for a moment, not until a time-out.

A cap counts connections, not callers: no key is known before the headers are read, which
is exactly what a flood of unauthenticated connections never sends.
"""

from __future__ import annotations

import asyncio
import json
import resource
from dataclasses import dataclass
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway._log import log
from gateway.server._tls import client_cert_name
from gateway.settings import Settings

__all__ = ["ConnectionLimits", "GuardedHttpProtocol", "guarded_protocol"]

# Descriptors a worker keeps for itself (audit database, logs, key files, the event loop),
# and one upstream connection a downstream one may hold while its call runs.
_RESERVED_FDS = 64
_FDS_PER_CONNECTION = 2


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int
    max_connections_per_peer: int  # 0: no per-peer cap (all callers behind one proxy)
    count_connections: bool = False  # into the metrics' gateway_open_connections

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        return cls(
            header_timeout_s=settings.server_header_timeout_s,
            body_timeout_s=settings.server_body_timeout_s,
            max_connections=within_descriptors(settings.server_max_connections),
            max_connections_per_peer=settings.server_max_connections_per_peer,
            count_connections=settings.server_metrics_token is not None,
        )


def within_descriptors(wanted: int) -> int:
    """``wanted`` connections, or fewer if this process may not open enough descriptors for
    them (two each, and a reserve): past the limit, accept() fails for everyone, a caller
    with a valid key included."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    room = max(1, (soft - _RESERVED_FDS) // _FDS_PER_CONNECTION)
    if room < wanted:
        log.warning(
            "server_connections_capped",
            wanted=wanted,
            allowed=room,
            reason=f"the process may open {soft} file descriptors (ulimit -n)",
        )
        return room
    return wanted


def guarded_protocol(limits: ConnectionLimits) -> Any:
    """The protocol factory uvicorn's ``http`` option takes (picklable, for its workers)."""
    return partial(GuardedHttpProtocol, limits=limits)


def _connections_gauge() -> Any:
    # Imported here: prometheus_client must first be imported after the run's metrics
    # directory is set (gateway.server._metrics), which is after this module is.
    from gateway.server._metrics import open_connections

    return open_connections()


def _answer(status: int, reason: str, error_type: str, message: str) -> bytes:
    body = json.dumps(
        {"type": "error", "error": {"type": error_type, "message": message}, "request_id": None}
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode()
    return head + body


class GuardedHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.peer: str | None = None
        self.client_cert_name: str | None = None  # mutual TLS: the verified cert's CN
        self._deadline: asyncio.TimerHandle | None = None
        self._gauge = _connections_gauge() if limits.count_connections else None

    # -- caps ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._gauge is not None:
            self._gauge.inc()
        self.peer = self.client[0] if self.client else None
        self.client_cert_name = client_cert_name(transport.get_extra_info("ssl_object"))
        over = self._over_cap()
        if over is not None:
            log.warning("server_connection_refused", reason=over)
            self.transport.write(
                _answer(
                    503,
                    "Service Unavailable",
                    "overloaded_error",
                    f"too many open connections ({over}); try again shortly.",
                )
            )
            self.transport.close()
            return
        self._arm(self.limits.header_timeout_s, "headers")

    def _over_cap(self) -> str | None:
        if len(self.connections) > self.limits.max_connections:
            return f"more than {self.limits.max_connections} on this worker"
        per_peer = self.limits.max_connections_per_peer
        if per_peer and self.peer is not None:
            same = sum(1 for c in self.connections if getattr(c, "peer", None) == self.peer)
            if same > per_peer:
                return f"more than {per_peer} from one address"
        return None

    # -- time-outs -------------------------------------------------------------------------

    def _arm(self, seconds: float, part: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._timed_out, part, seconds)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self, part: str, seconds: float) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log.warning("server_read_timed_out", part=part, timeout_s=seconds)
        # Headers late: no answer to this request began. Body late: unless the app already
        # answered (a refusal that left the body unread), the client still waits for one.
        if part == "headers" or self.cycle is None or not self.cycle.response_started:
            message = f"the request's {part} did not arrive within {seconds:g} s."
            self.transport.write(_answer(408, "Request Timeout", "timeout_error", message))
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.client_cert_name is not None:
            # The ASGI TLS extension's name for it: the app reads the verified subject here.
            self.scope["extensions"] = {"tls": {"client_cert_name": self.client_cert_name}}
        if self._deadline is None:  # the next request on a kept-alive connection
            self._arm(self.limits.header_timeout_s, "headers")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.limits.body_timeout_s, "body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._gauge is not None:
            self._gauge.dec()
        super().connection_lost(exc)
