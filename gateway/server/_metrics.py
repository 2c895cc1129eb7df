"""Prometheus metrics for `gateway serve`: one exposition for all its workers, on /metrics.

    metrics = Metrics()                             # in each worker's app
    app = CountRequests(app, metrics=metrics)       # every HTTP request, counted when over
    stop = log.observe(metrics.on_log_event)        # upstream latency and failures
    metrics.exposition()                            # the text a scrape gets (all workers)

Enabled by ``server_metrics_token`` (a scrape sends it as a bearer token). With several
workers each one is a process of its own, and a scrape reaches one of them: so every worker
writes its values to files in one directory made fresh for the run
(``PROMETHEUS_MULTIPROC_DIR``, set before `prometheus_client` is first imported: see
:func:`gateway.server._run.serve`), and whichever worker answers a scrape adds them all up
(prometheus_client's multiprocess mode). In-process (an app built in a test) the values
stay in this object's own registry.

Labels are bounded, and never a caller, a key, a prompt or an answer: the route's template,
a task only when it is a loaded policy's (else ``other``), the HTTP status, whether the
answer came from the record, an upstream failure's kind from a fixed list (else ``other``).
"""

from __future__ import annotations

import os
import time
from functools import cache
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CountRequests", "Metrics", "open_connections"]

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client on its import
OTHER = "other"

# The Messages API's error types and the gateway's own names for a call that got no answer:
# an upstream may send any identifier as its type, so any other one is counted as "other".
UPSTREAM_KINDS = frozenset(
    {
        "timeout",
        "connection_error",
        "malformed_response",
        "truncated_response",
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "billing_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "timeout_error",
        "conflict_error",
        "api_error",
        "overloaded_error",
    }
)

# Seconds: from a cache hit (well under a millisecond of gateway work) to a long generation.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


def _multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROCESS_DIR_ENV))


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        # Multiprocess: values go to the run's files whatever the registry, and a scrape
        # reads the files; in-process: they are read from this registry.
        self._registry = None if _multiprocess() else CollectorRegistry()
        registry = self._registry
        self.requests = Counter(
            "gateway_requests",
            "HTTP requests answered, by route, task, status and whether served from the record.",
            ["route", "task", "status", "cached"],
            registry=registry,
        )
        self.duration = Histogram(
            "gateway_request_duration_seconds",
            "Time from a request's arrival to its answer's end (a stream's last event).",
            ["route", "cached"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_duration = Histogram(
            "gateway_upstream_duration_seconds",
            "Time the upstream call took, retries included, for answers from the model.",
            ["task"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.upstream_failures = Counter(
            "gateway_upstream_failures",
            "Calls the upstream failed after the gateway's own retries, by kind.",
            ["task", "kind"],
            registry=registry,
        )
        self.errors = Counter(
            "gateway_errors",
            "Requests that ended in one of the gateway's errors, by its class (AuditWriteError: "
            "the audit log could not be written, so nothing was served).",
            ["error"],
            registry=registry,
        )
        self.in_progress = Gauge(
            "gateway_requests_in_progress",
            "Requests being answered now (a stream until its last event), over live workers.",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.open_streams = Gauge(
            "gateway_open_streams",
            "Server-sent event streams being sent now, over live workers.",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self._tasks: frozenset[str] = frozenset()

    def know_tasks(self, tasks: list[str]) -> None:
        """The loaded policies' tasks: the only task names a label may carry."""
        self._tasks = frozenset(tasks)

    def task_label(self, task: object) -> str:
        return task if isinstance(task, str) and task in self._tasks else OTHER

    def on_log_event(self, event: str, fields: dict[str, Any]) -> None:
        """Upstream figures, from the request path's own events (gateway._log)."""
        if event == "request_completed" and not fields.get("cached"):
            latency_ms = fields.get("latency_ms")
            if isinstance(latency_ms, int | float):
                task = self.task_label(fields.get("task"))
                self.upstream_duration.labels(task).observe(latency_ms / 1000)
        elif event == "request_failed":
            kind = fields.get("error_type")
            kind = kind if kind in UPSTREAM_KINDS else OTHER
            self.upstream_failures.labels(self.task_label(fields.get("task")), kind).inc()

    def exposition(self) -> bytes:
        if self._registry is not None:
            return generate_latest(self._registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)


@cache
def open_connections() -> Gauge:
    """This worker's open connections (set by the guarded protocol; summed over live workers)."""
    return Gauge(
        "gateway_open_connections",
        "Open client connections, summed over the live workers.",
        multiprocess_mode="livesum",
        registry=None,
    )


class CountRequests:
    """ASGI middleware: each HTTP request counted and timed once its answer is over."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        metrics = self.metrics
        started = time.perf_counter()
        status = 500
        streaming = False
        metrics.in_progress.inc()

        async def sending(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = dict(message.get("headers") or ())
                if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                    streaming = True
                    metrics.open_streams.inc()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            metrics.in_progress.dec()
            if streaming:
                metrics.open_streams.dec()
            state: dict[str, Any] = scope.get("state") or {}
            route = _route_of(scope)
            cached = state.get("cached")
            cached_label = "" if cached is None else str(bool(cached)).lower()
            task = self.metrics.task_label(state.get("task"))
            self.metrics.requests.labels(route, task, str(status), cached_label).inc()
            if isinstance(error := state.get("gateway_error"), str):
                self.metrics.errors.labels(error).inc()
            self.metrics.duration.labels(route, cached_label).observe(time.perf_counter() - started)


def _route_of(scope: Scope) -> str:
    """The matched route's template (``/v1/models/{model_id:path}``), never the raw path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else OTHER
