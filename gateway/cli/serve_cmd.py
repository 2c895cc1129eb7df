"""`gateway serve`: the Anthropic-compatible HTTP endpoint (docs/server.md).

    $ gateway keys create --caller payments-svc
    $ gateway serve --port 8080 --workers 2
    $ gateway serve --port 8443 --tls-cert server.pem --tls-key server.key
    $ ANTHROPIC_BASE_URL=http://127.0.0.1:8080 ANTHROPIC_API_KEY=gwk_... python app.py

Before anything listens, the policies are loaded and the audit database opened once, so a
bad setting is one line and an exit code, not a traceback from a worker.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from gateway.callers import CallerKeys
from gateway.catalog import Catalog
from gateway.cli._context import settings_of, state_of
from gateway.errors import ConfigurationError, PolicyLoadError
from gateway.evidence import pinned_for_start
from gateway.logging import configure_logging
from gateway.policy import PolicySet
from gateway.settings import CONFIG_ENV, Settings


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Worker processes sharing the port (each opens its own audit store).",
)
@click.option("--log-level", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING"]))
@click.option(
    "--otel",
    is_flag=True,
    help="One OpenTelemetry span per request (GenAI conventions, no content); needs the "
    "otel extra. Same as GATEWAY_OTEL=1.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate chain (PEM). Same as GATEWAY_SERVER_TLS_CERT.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The certificate's private key (PEM). Same as GATEWAY_SERVER_TLS_KEY.",
)
@click.option(
    "--tls-client-ca",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Mutual TLS: refuse clients without a certificate signed by this CA (PEM). Same "
    "as GATEWAY_SERVER_TLS_CLIENT_CA.",
)
@click.option(
    "--tls-client-caller",
    is_flag=True,
    help="Mutual TLS: the client certificate's common name must be the caller key's caller. "
    "Same as GATEWAY_SERVER_TLS_CLIENT_CALLER=1.",
)
@click.pass_context
def serve_command(
    ctx: click.Context,
    host: str,
    port: int,
    workers: int,
    log_level: str,
    otel: bool,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_client_ca: Path | None,
    tls_client_caller: bool,
) -> None:
    """Serve the Messages API on HOST:PORT; callers authenticate with caller keys."""
    configure_logging(level=log_level)
    settings = settings_of(ctx)
    config = state_of(ctx).config
    if config is not None:  # workers read their settings themselves: the file goes there too
        os.environ[CONFIG_ENV] = str(config.resolve())
    if tls_cert is not None or tls_key is not None:
        cert = tls_cert or settings.server_tls_cert
        key = tls_key or settings.server_tls_key
        if cert is None or key is None:
            raise ConfigurationError(
                "TLS needs both a certificate and its key, or neither.",
                hint="Give --tls-cert and --tls-key (GATEWAY_SERVER_TLS_CERT and _KEY) together.",
            )
        # Workers build their settings from the environment: the flags go there too.
        os.environ.update(
            {"GATEWAY_SERVER_TLS_CERT": str(cert), "GATEWAY_SERVER_TLS_KEY": str(key)}
        )
        settings = settings.model_copy(update={"server_tls_cert": cert, "server_tls_key": key})
    settings = _client_certificates(settings, tls_client_ca, tls_client_caller)
    # The ASGI stack loads for this command only.
    from gateway.server import check_address, check_not_self, check_tls, serve

    scheme = "https" if check_tls(settings) else "http"
    if otel and not settings.server_otel:
        # Workers build their settings from the environment: the flag goes there too.
        os.environ["GATEWAY_OTEL"] = "1"
        settings = settings.model_copy(update={"server_otel": True})
    if settings.server_otel:
        from gateway.server import check_tracing

        check_tracing()
    policies = PolicySet.load(Path(settings.policy_dir), Catalog.load(settings.catalog_override))
    if not policies.policies():
        raise PolicyLoadError(
            f"no policy in {str(settings.policy_dir)!r} loads, so every request would be refused.",
            hint="Run 'gateway policy review' on the folder.",
        )
    pinned_for_start(settings)  # refused here, once, rather than in every worker
    with CallerKeys.open(settings) as keys:  # creates a new SQLite file whole, once
        issued = keys.list()
    active = sum(1 for k in issued if k.active)
    check_not_self(settings, host=host, port=port, caller_key_hashes={k.key_hash for k in issued})
    if active == 0:
        click.echo(
            "warning: no caller key is active, so every request will be refused; "
            "issue one with 'gateway keys create --caller NAME'.",
            err=True,
        )
    check_address(host, port)  # a busy port is one line and exit 2, nothing said as serving
    mutual = ", client certificates required" if settings.server_tls_client_ca else ""
    click.echo(
        f"gateway serving on {scheme}://{host}:{port} ({workers} worker(s){mutual})", err=True
    )
    serve(settings, host=host, port=port, workers=workers)


def _client_certificates(settings: Settings, ca: Path | None, caller: bool) -> Settings:
    """The mutual-TLS flags over the settings, also put where the workers read them."""
    ca = ca or settings.server_tls_client_ca
    caller = caller or settings.server_tls_client_caller
    if ca is not None and settings.server_tls_cert is None:
        raise ConfigurationError(
            "client certificates need TLS: --tls-client-ca without a server certificate.",
            hint="Give --tls-cert and --tls-key too (GATEWAY_SERVER_TLS_CERT and _KEY).",
        )
    if caller and ca is None:
        raise ConfigurationError(
            "--tls-client-caller needs client certificates.",
            hint="Give --tls-client-ca (GATEWAY_SERVER_TLS_CLIENT_CA) too.",
        )
    if ca is not None:
        os.environ["GATEWAY_SERVER_TLS_CLIENT_CA"] = str(ca)
    if caller:
        os.environ["GATEWAY_SERVER_TLS_CLIENT_CALLER"] = "1"
    return settings.model_copy(
        update={"server_tls_client_ca": ca, "server_tls_client_caller": caller}
    )
