"""HTTPS for `gateway serve`: the certificate and key files, checked once before it listens.

    check_tls(settings)            # ConfigurationError naming the file and what is wrong
    uvicorn.Config(app, **tls_options(settings), ...)

Caller keys are bearer tokens: without TLS (here or at a proxy in front) they cross the
network readable. uvicorn wraps each accepted connection in asyncio's SSL transport, under
the same guarded protocol (:mod:`gateway.server._protocol`), so the read time-outs and
connection caps hold for HTTPS as for HTTP.
"""

from __future__ import annotations

import ssl
from typing import Any

from gateway.errors import ConfigurationError
from gateway.settings import Settings

__all__ = ["check_tls", "tls_options"]


def tls_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's TLS options; none when no certificate is configured."""
    if settings.server_tls_cert is None or settings.server_tls_key is None:
        return {}
    return {
        "ssl_certfile": str(settings.server_tls_cert),
        "ssl_keyfile": str(settings.server_tls_key),
    }


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
    return True
