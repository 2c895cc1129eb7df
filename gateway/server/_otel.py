"""OpenTelemetry for `gateway serve`: one span per Messages request, following the GenAI
semantic conventions, never with prompt or answer content.

    tracing = Tracing.open()            # ConfigurationError when the otel extra is missing
    app = TraceMessages(app, tracing)   # a span for each POST /v1/messages
    tracing.shutdown()                  # flushes what is queued (the lifespan's last step)

A span is named ``chat <model>`` and carries ``gen_ai.operation.name`` (``chat``),
``gen_ai.provider.name``, ``gen_ai.request.model`` (the policy's pinned model),
``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` and
``gen_ai.response.finish_reasons``, and the gateway's own ``gateway.task``,
``gateway.caller``, ``gateway.key_id``, ``gateway.request_id``, ``gateway.audit.seq`` and
``gateway.cached``; ``http.response.status_code``, and ``error.type`` when it failed. Its
kind is CLIENT, as the conventions ask of a call to a model; a ``traceparent`` the caller
sent makes it a child of the caller's trace. The values come from what the route left in
the request's state (as the access log's do), read when the exchange is over.

Exporting is configured as OpenTelemetry configures it, through its own variables:
``OTEL_TRACES_EXPORTER`` = ``otlp`` (the default when ``opentelemetry-exporter-otlp`` is
installed; its ``OTEL_EXPORTER_OTLP_*`` variables apply), ``console`` (one JSON span a line
on stdout; the default otherwise) or ``none``; ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_TRACES_SAMPLER`` as usual.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import ConfigurationError, GatewayError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

    from gateway.server._lifecycle import ServerState

__all__ = ["TraceMessages", "Tracing", "check_tracing", "require_otel"]

MESSAGES_PATH = "/v1/messages"
OPERATION = "chat"
INSTALL = "install compliance-gateway[otel] (opentelemetry-api and opentelemetry-sdk)"


def require_otel() -> None:
    """Refuse, in one line, to trace without the OpenTelemetry SDK."""
    try:
        import opentelemetry.sdk.trace  # noqa: F401 - only whether it imports
    except ImportError:
        raise ConfigurationError(
            "OpenTelemetry spans are enabled (--otel or GATEWAY_OTEL) but the OpenTelemetry "
            f"SDK is not installed: {INSTALL}, or leave them off."
        ) from None


def check_tracing() -> None:
    """Before any worker starts: the SDK imports and the exporters named can be built, so a
    bad setting is one line from ``gateway serve``, not a traceback from each worker."""
    require_otel()
    Tracing.open().shutdown()


class Tracing:
    """This process's tracer provider and its exporters; opened after the fork."""

    def __init__(self, provider: TracerProvider) -> None:
        from gateway._keys import GATEWAY_VERSION

        self._provider = provider
        self.tracer: Tracer = provider.get_tracer("compliance-gateway", GATEWAY_VERSION)

    @classmethod
    def open(cls, environ: Mapping[str, str] | None = None) -> Tracing:
        require_otel()
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        # OpenTelemetry's own variables, which its SDK reads too (resource, sampler, OTLP).
        env = os.environ if environ is None else environ
        resource = Resource.create()
        if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        ):
            resource = resource.merge(Resource({SERVICE_NAME: "compliance-gateway"}))
        provider = TracerProvider(resource=resource)
        for exporter in _exporters(env):
            provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider)

    def shutdown(self) -> None:
        self._provider.shutdown()


def _exporters(env: Mapping[str, str]) -> list[SpanExporter]:
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names:
        names = ["otlp" if _otlp_exporter(env, required=False) is not None else "console"]
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(
                ConsoleSpanExporter(
                    out=sys.stdout, formatter=lambda span: span.to_json(indent=None) + "\n"
                )
            )
        elif name == "otlp":
            exporter = _otlp_exporter(env, required=True)
            assert exporter is not None
            exporters.append(exporter)
        else:
            raise ConfigurationError(
                f"OTEL_TRACES_EXPORTER names {name!r}, which gateway serve does not know.",
                hint="Use otlp, console or none.",
            )
    return exporters


# The OTLP exporter is a package of its own, optional even with the otel extra.
_OTLP_MODULES = {
    "grpc": "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "http/protobuf": "opentelemetry.exporter.otlp.proto.http.trace_exporter",
}


def _otlp_exporter(env: Mapping[str, str], *, required: bool) -> SpanExporter | None:
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    try:
        module = importlib.import_module(
            _OTLP_MODULES.get(protocol, _OTLP_MODULES["http/protobuf"])
        )
    except ImportError:
        if not required:
            return None
        raise ConfigurationError(
            f"OTEL_TRACES_EXPORTER is otlp but the OTLP exporter ({protocol}) is not installed.",
            hint="Install opentelemetry-exporter-otlp, or set OTEL_TRACES_EXPORTER=console.",
        ) from None
    exporter: SpanExporter = module.OTLPSpanExporter()  # configured by OTEL_EXPORTER_OTLP_*
    return exporter


class TraceMessages:
    """ASGI middleware: a span around each ``POST /v1/messages``, ended once its answer (the
    last event, for a stream) went out."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self.app = app
        self.tracer = tracing.tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != MESSAGES_PATH:
            await self.app(scope, receive, send)
            return
        from opentelemetry.trace import SpanKind

        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        span = self.tracer.start_span(
            OPERATION,
            kind=SpanKind.CLIENT,
            context=_caller_context(scope),
            attributes={"gen_ai.operation.name": OPERATION},
        )
        failure: str | None = None
        try:
            await self.app(scope, receive, sending)
        except BaseException as exc:
            failure = type(exc).__name__
            raise
        finally:
            _describe(span, scope.get("state") or {}, status, failure)
            span.end()


def _caller_context(scope: Scope) -> Any:
    """The caller's trace context, when its request carried one (W3C ``traceparent``)."""
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    if "traceparent" not in headers:
        return None
    from opentelemetry.propagate import extract

    return extract(headers)


def _describe(span: Span, state: Mapping[str, Any], status: int, failure: str | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    attributes: dict[str, Any] = {"http.response.status_code": status}
    task = state.get("task")
    if isinstance(task, str):
        attributes["gateway.task"] = task
        server: ServerState | None = state.get("server")
        try:
            policy = server.policies.get(task) if server is not None else None
        except GatewayError:
            policy = None  # an unknown task: nothing was asked of a model
        if server is not None and policy is not None:
            attributes["gen_ai.request.model"] = policy.model.id
            span.update_name(f"{OPERATION} {policy.model.id}")
            model = server.catalog.get(policy.model.id)
            if model is not None:
                attributes["gen_ai.provider.name"] = model.provider
    for name, key in (
        ("caller", "gateway.caller"),
        ("key_id", "gateway.key_id"),
        ("request_id", "gateway.request_id"),
        ("seq", "gateway.audit.seq"),
        ("cached", "gateway.cached"),
        ("response_model", "gen_ai.response.model"),
    ):
        if (value := state.get(name)) is not None:
            attributes[key] = value
    usage = state.get("usage")
    if isinstance(usage, Mapping):
        for name in ("input_tokens", "output_tokens"):
            if isinstance(count := usage.get(name), int):
                attributes[f"gen_ai.usage.{name}"] = count
    if isinstance(stop := state.get("stop_reason"), str):
        attributes["gen_ai.response.finish_reasons"] = [stop]
    error = failure or state.get("error_type") or (str(status) if status >= 400 else None)
    if error is not None:
        attributes["error.type"] = error
        span.set_status(Status(StatusCode.ERROR))
    span.set_attributes(attributes)
