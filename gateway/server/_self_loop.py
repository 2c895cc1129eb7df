"""Refuse to start a server whose upstream is itself.

    check_not_self(settings, host="127.0.0.1", port=8080, caller_key_hashes={...})

Two set-ups send the gateway's own calls back to it: an upstream base URL that is the address
the server listens on (one shell exporting ``ANTHROPIC_BASE_URL`` for both the client and the
server), and an upstream key that is one of the gateway's caller keys (a caller's key pasted
as ``ANTHROPIC_API_KEY``). The first loops each request until a time-out, and its client sees
a 404 about the model id; the second sends a caller key, a secret of this deployment, to the
model provider. Both are refused at start, named, with the fix.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection
from urllib.parse import urlsplit

from gateway.callers import hash_key
from gateway.errors import ConfigurationError
from gateway.settings import Settings

__all__ = ["check_not_self"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# A server bound to one of these answers on every address of the machine.
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 (recognised here, never bound)


def check_not_self(
    settings: Settings,
    *,
    host: str,
    port: int,
    caller_key_hashes: Collection[str],
) -> None:
    """Raise :class:`ConfigurationError` when the upstream is this server."""
    for name, url in (
        ("ANTHROPIC_BASE_URL", settings.anthropic_base_url),
        ("GATEWAY_BEDROCK_BASE_URL", settings.bedrock_base_url),
        ("GATEWAY_VERTEX_BASE_URL", settings.vertex_base_url),
    ):
        if url and _points_at(url, host, port):
            raise ConfigurationError(
                f"the upstream URL {name}={url} is this gateway's own address ({host}:{port}), "
                "so every request would be sent back to the gateway.",
                hint=f"Set {name} to the model provider (or unset it for the public API); "
                "clients, not the server, point their base URL at the gateway.",
            )
    if settings.anthropic_api_key is not None:
        digest = hash_key(settings.anthropic_api_key.get_secret_value())
        if digest in caller_key_hashes:
            raise ConfigurationError(
                "ANTHROPIC_API_KEY is one of this gateway's caller keys, not a model provider "
                "key; the gateway would send it upstream.",
                hint="Set ANTHROPIC_API_KEY to the Anthropic API key from your secret store; "
                "caller keys are for clients of the gateway.",
            )


def _points_at(url: str, host: str, port: int) -> bool:
    try:
        parts = urlsplit(url)
        target_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False  # an unusable URL fails where it is used, with its own message
    if target_port != port or not parts.hostname:
        return False
    return bool(_addresses(parts.hostname) & _listening(host))


def _listening(host: str) -> set[str]:
    """The addresses a server bound to ``host`` answers on: all of this machine's for a
    wildcard bind, else the host's."""
    if host in _WILDCARDS:
        return _addresses("localhost") | _addresses(socket.gethostname()) | set(_WILDCARDS)
    return _addresses(host)


def _addresses(name: str) -> set[str]:
    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
    except (socket.gaierror, UnicodeError):
        return set()
    # Every loopback address is this machine, whichever one the URL names.
    if any(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found):
        found |= {"127.0.0.1", "::1"}
    return found
