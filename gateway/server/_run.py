"""Run the app on uvicorn: one process, or ``workers`` processes on one socket.

    serve(settings, host="127.0.0.1", port=8080, workers=1)

One worker runs the app built from ``settings`` in this process. Several are uvicorn's own
supervisor: it binds the socket, then starts each worker as a fresh process that builds its
app from the environment (:func:`app_from_env`), so each opens its audit store itself.

On SIGTERM or SIGINT uvicorn stops accepting connections and lets the requests in flight
finish, for up to ``server_shutdown_grace_s`` seconds; then the lifespan waits (as long
again) for gateway calls still recording, closes the gateway and exits 0, with one worker
as with several.

Each connection is uvicorn's httptools protocol with read time-outs and connection caps
(:mod:`gateway.server._protocol`), over TLS when ``server_tls_cert`` and ``server_tls_key``
are set.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import math
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from gateway.errors import ConfigurationError
from gateway.server._app import SWITCH_INTERVAL_S, create_app
from gateway.server._heap import settle_heap
from gateway.server._protocol import ConnectionLimits, guarded_protocol
from gateway.server._tls import tls_options
from gateway.settings import Settings

__all__ = ["check_address", "serve"]

APP_FROM_ENV = "gateway.server._app:app_from_env"
# How long uvicorn's supervisor waits for a worker's answer to its health check before it
# kills and restarts the worker. A worker answers only once it has imported the gateway (the
# SDK, the ASGI stack): several seconds on a busy host, where uvicorn's 5 s default killed
# every worker before it started, again and again, and the server never became ready.
WORKER_HEALTHCHECK_S = 60
# prometheus_client's multiprocess mode: named here so that this module need not import it.
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
_METRICS_PREFIX = "gateway-metrics-"  # then the serving process's pid


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


def check_address(host: str, port: int) -> None:
    """Bind ``host:port`` as uvicorn will (SO_REUSEADDR) and let it go: a port in use or an
    address this machine does not have is a :class:`ConfigurationError` before the server
    says it is serving, not uvicorn's startup failure after it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigurationError(
            f"cannot listen on {host}:{port}: {exc.strerror}.", hint="Check --host."
        ) from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            in_use = exc.errno == errno.EADDRINUSE
            raise ConfigurationError(
                f"cannot listen on {host}:{port}: "
                + ("another process is listening there." if in_use else f"{exc.strerror}."),
                hint="Choose another --port, or stop the other server first."
                if in_use
                else "Check --host and --port.",
            ) from None


def serve(settings: Settings, *, host: str, port: int, workers: int = 1) -> None:
    if settings.server_metrics_token is None:
        _serve(settings, host=host, port=port, workers=workers)
        return
    # The run's metrics directory: every worker writes its values there and a scrape adds
    # them up. Fresh for each run (a previous run's counts are not this one's), set before
    # prometheus_client is first imported (here or in a worker, which inherits it), and
    # removed when the server stops; uvicorn ends a process stopped by a signal with that
    # signal, past any cleanup, so a run also removes the directories of runs that are gone.
    _remove_stale_metrics_directories()
    with tempfile.TemporaryDirectory(prefix=f"{_METRICS_PREFIX}{os.getpid()}-") as directory:
        os.environ[MULTIPROCESS_DIR_ENV] = directory
        try:
            _serve(settings, host=host, port=port, workers=workers)
        finally:
            del os.environ[MULTIPROCESS_DIR_ENV]


def _remove_stale_metrics_directories() -> None:
    for folder in Path(tempfile.gettempdir()).glob(f"{_METRICS_PREFIX}*-*"):
        pid = folder.name.removeprefix(_METRICS_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or folder.owner() != getpass.getuser():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            continue  # alive, another user's


def _serve(settings: Settings, *, host: str, port: int, workers: int) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if workers > 1:
        uvicorn.run(
            APP_FROM_ENV,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
            **_options(settings),
        )
        return
    config = uvicorn.Config(create_app(settings), host=host, port=port, **_options(settings))
    settle_heap()
    _Server(config).run()


class _Server(uvicorn.Server):
    """One worker's server, stopped as the several-worker supervisor is stopped.

    uvicorn's single-process server raises SIGTERM or SIGINT again once it has shut down
    gracefully, so one worker exited 143 (or 130) where the supervisor of several exits 0.
    A stop by either signal that finished its graceful shutdown exits 0 here too
    (docs/server.md, "Stopping"); a second SIGINT, which cuts the shutdown short, still
    ends the process at once."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            self._captured_signals.clear()
