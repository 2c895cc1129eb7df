"""The ASGI app: routes, one exception handler per error type, and the lifespan.

    app = create_app(settings)          # Starlette; run it with uvicorn (see _run.py)

The lifespan opens the process's :class:`ServerState` (gateway, caller keys, policies) and
closes it after the last request; routes find it in ``request.state.server``.
"""

from __future__ import annotations

import hmac
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway._keys import new_request_id
from gateway._log import log
from gateway.errors import GatewayError
from gateway.server import _routes
from gateway.server._access import AccessLog
from gateway.server._drain import DrainCancel, quiet_uvicorn_cancel_line
from gateway.server._errors import ApiError, ErrorAnswer, answer_for, error_body
from gateway.server._lifecycle import ServerState
from gateway.settings import Settings

if TYPE_CHECKING:
    from gateway.server._metrics import Metrics

__all__ = ["SWITCH_INTERVAL_S", "app_from_env", "create_app"]

# How long a thread parsing a large body (or writing to the audit store) may hold the
# interpreter lock before the event loop may take it: 1 ms, not Python's 5 ms, so that other
# callers' requests wait a few milliseconds behind a heavy one, not the whole parse.
SWITCH_INTERVAL_S = 0.001

# The API's error type for a status the router answers itself (no such route, method).
_ROUTER_TYPES = {404: "not_found_error", 405: "invalid_request_error"}


def _respond(request: Request, answer: ErrorAnswer) -> Response:
    headers = dict(answer.headers)
    # The audit record's id when the request was recorded (refused, failed, cancelled);
    # otherwise a fresh one that is in no audit record, only in the access log, so that the
    # error can still be traced there (a missing key, an unknown route, a body too large).
    request_id = answer.request_id or getattr(request.state, "request_id", None)
    if request_id is None:
        request_id = new_request_id()
        request.state.unrecorded = True
    headers["request-id"] = request_id
    request.state.request_id = request_id
    request.state.error_type = answer.error_type
    body = error_body(answer)
    body["request_id"] = request_id
    return JSONResponse(body, status_code=answer.status, headers=headers)


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    request.state.gateway_error = type(exc).__name__  # a class of gateway.errors: bounded
    return _respond(request, answer_for(exc))


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return _respond(request, exc.answer())


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    error_type = _ROUTER_TYPES.get(exc.status_code, "invalid_request_error")
    answer = ErrorAnswer(exc.status_code, error_type, str(exc.detail))
    return _respond(request, answer)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("server_internal_error", error=type(exc).__name__, path=request.url.path)
    answer = ErrorAnswer(500, "api_error", f"internal error ({type(exc).__name__}).")
    return _respond(request, answer)


ROUTES = [
    Route("/v1/messages", _routes.messages, methods=["POST"]),
    Route("/v1/messages/count_tokens", _routes.count_tokens, methods=["POST"]),
    Route("/v1/models", _routes.models, methods=["GET"]),
    Route("/v1/models/{model_id:path}", _routes.model, methods=["GET"]),
    Route("/healthz", _routes.healthz, methods=["GET"]),
    Route("/readyz", _routes.readyz, methods=["GET"]),
]


def _metrics_route(token: str, metrics: Metrics) -> Route:
    """GET /metrics for a scrape that sends the metrics token (never a caller key)."""
    expected = f"Bearer {token}".encode()

    async def scrape(request: Request) -> Response:
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            raise ApiError(
                401,
                "authentication_error",
                "the metrics need the metrics token as a bearer token "
                "(GATEWAY_SERVER_METRICS_TOKEN), not a caller key.",
            )
        return Response(metrics.exposition(), media_type=metrics.content_type)

    return Route("/metrics", scrape, methods=["GET"])


def create_app(settings: Settings) -> Starlette:
    # DrainCancel inside the access log: a request cancelled at the drain deadline is
    # answered, and logged with that answer, instead of its CancelledError reaching uvicorn.
    middleware = [Middleware(AccessLog), Middleware(DrainCancel)]
    routes = list(ROUTES)
    counted = None
    if settings.server_metrics_token is not None:
        # Imported only here: prometheus_client must be imported after the run's metrics
        # directory is set (gateway.server._run.serve).
        from gateway.server import _metrics

        counted = _metrics.Metrics()
        middleware.insert(0, Middleware(_metrics.CountRequests, metrics=counted))
        token = settings.server_metrics_token.get_secret_value()
        routes.append(_metrics_route(token, counted))
    tracing = None
    if settings.server_otel:
        from gateway.server._otel import TraceMessages, Tracing

        tracing = Tracing.open()
        middleware.append(Middleware(TraceMessages, tracing=tracing))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        state = await ServerState.open(settings)
        quiet_uvicorn_cancel_line()  # the state says it, once, when it closes
        unobserve = None
        if counted is not None:
            counted.know_tasks(state.policies.tasks())
            unobserve = log.observe(counted.on_log_event)
        try:
            yield {"server": state}
        finally:
            try:
                await state.close()
            finally:
                if unobserve is not None:
                    unobserve()
                if tracing is not None:
                    tracing.shutdown()  # flushes the spans still queued

    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            GatewayError: _gateway_error,
            ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
        lifespan=lifespan,
    )


def app_from_env() -> Starlette:
    """The app for a uvicorn worker process: its settings read from the environment there."""
    from gateway.logging import configure_logging

    configure_logging()
    from gateway.server._heap import settle_heap

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # each worker is a process of its own
    app = create_app(Settings.from_env())
    settle_heap()
    return app
