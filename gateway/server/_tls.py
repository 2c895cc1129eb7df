"""HTTPS for `gateway serve`: the certificate and key files, checked once before it listens.

    check_tls(settings)            # ConfigurationError naming the file and what is wrong
    uvicorn.Config(app, **tls_options(settings), ...)

Caller keys are bearer tokens: without TLS (here or at a proxy in front) they cross the
network readable. uvicorn wraps each accepted connection in asyncio's SSL transport, under
the same guarded protocol (:mod:`gateway.server._protocol`), so the read time-outs and
connection caps hold for HTTPS as for HTTP.

Mutual TLS (``server_tls_client_ca``): a client must present a certificate that chains to
that CA, or the handshake fails. The verified certificate's common name reaches the app as
the ASGI TLS extension's ``client_cert_name`` (:mod:`gateway.server._protocol`); with
``server_tls_client_caller`` it must be the caller key's caller (gateway.server._routes).
"""

from __future__ import annotations

import ssl
from typing import Any

from gateway.errors import ConfigurationError
from gateway.settings import Settings

__all__ = ["check_tls", "client_cert_name", "tls_options"]


def tls_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's TLS options; none when no certificate is configured."""
    if settings.server_tls_cert is None or settings.server_tls_key is None:
        return {}
    options: dict[str, Any] = {
        "ssl_certfile": str(settings.server_tls_cert),
        "ssl_keyfile": str(settings.server_tls_key),
    }
    if settings.server_tls_client_ca is not None:
        # Mutual TLS: a client without a certificate that chains to this CA fails the
        # handshake; no request of it is read.
        options["ssl_ca_certs"] = str(settings.server_tls_client_ca)
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    return options


def client_cert_name(ssl_object: object) -> str | None:
    """The common name of a verified client certificate on this connection, or None."""
    getpeercert = getattr(ssl_object, "getpeercert", None)
    if getpeercert is None:
        return None
    cert = getpeercert()
    for rdn in (cert or {}).get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return None


def check_tls(settings: Settings) -> bool:
    """Whether the server will speak TLS; a certificate or key it could not load is a
    :class:`ConfigurationError` here, not a traceback from every worker."""
    cert, key = settings.server_tls_cert, settings.server_tls_key
    if cert is None or key is None:
        return False
    for path, what in ((cert, "certificate"), (key, "private key")):
        if not path.is_file():
            raise ConfigurationError(
                f"the TLS {what} file {str(path)!r} does not exist.",
                hint="Point --tls-cert/--tls-key (GATEWAY_SERVER_TLS_CERT/KEY) at PEM files.",
            )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise ConfigurationError(
            f"cannot use the TLS certificate {str(cert)!r} with the key {str(key)!r}: {reason}.",
            hint="Give the PEM certificate chain and its own unencrypted private key.",
        ) from None
    client_ca = settings.server_tls_client_ca
    if client_ca is not None:
        if not client_ca.is_file():
            raise ConfigurationError(
                f"the client CA file {str(client_ca)!r} does not exist.",
                hint="Point --tls-client-ca (GATEWAY_SERVER_TLS_CLIENT_CA) at the PEM file of "
                "the CA that signs the callers' certificates.",
            )
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
            raise ConfigurationError(
                f"cannot use the client CA file {str(client_ca)!r}: {reason}.",
                hint="Give the CA certificate(s) as PEM.",
            ) from None
    return True
