"""Run the app on uvicorn: one process, or ``workers`` processes on one socket.

    serve(settings, host="127.0.0.1", port=8080, workers=1)

One worker runs the app built from ``settings`` in this process. Several are uvicorn's own
supervisor: it binds the socket, then starts each worker as a fresh process that builds its
app from the environment (:func:`app_from_env`), so each opens its audit store itself.

On SIGTERM or SIGINT uvicorn stops accepting connections and lets the requests in flight
finish, for up to ``server_shutdown_grace_s`` seconds; then the lifespan waits (as long
again) for gateway calls still recording, closes the gateway and exits.

Each connection is uvicorn's httptools protocol with read time-outs and connection caps
(:mod:`gateway.server._protocol`), over TLS when ``server_tls_cert`` and ``server_tls_key``
are set.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import uvicorn

from gateway.server._app import SWITCH_INTERVAL_S, create_app
from gateway.server._protocol import ConnectionLimits, guarded_protocol
from gateway.server._tls import tls_options
from gateway.settings import Settings

__all__ = ["serve"]

APP_FROM_ENV = "gateway.server._app:app_from_env"


def _options(settings: Settings) -> dict[str, Any]:
    return {
        "lifespan": "on",
        "access_log": False,  # the app's own structured access log replaces it
        "log_level": "warning",
        "server_header": False,
        # Client addresses are not used (callers are named by their keys): no per-request
        # X-Forwarded-For rewriting.
        "proxy_headers": False,
        "timeout_graceful_shutdown": math.ceil(settings.server_shutdown_grace_s),
        # Streams of long thinking can be quiet for minutes: keep idle connections open as
        # long as the SDKs wait (their default time-out is ten minutes).
        "timeout_keep_alive": 75,
        # httptools' parser, with header and body time-outs and connection caps.
        "http": guarded_protocol(ConnectionLimits.from_settings(settings)),
        "loop": "uvloop",
        **tls_options(settings),
    }


def serve(settings: Settings, *, host: str, port: int, workers: int = 1) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if workers > 1:
        uvicorn.run(
            APP_FROM_ENV, factory=True, host=host, port=port, workers=workers, **_options(settings)
        )
        return
    config = uvicorn.Config(create_app(settings), host=host, port=port, **_options(settings))
    uvicorn.Server(config).run()
