"""The SDK clients of a transport, built explicitly: no setting read from the environment, no
SDK retries or tracing, only the headers the profile allows, every body announced before it
is sent.

    client = build_client(FIRST_PARTY, ApiKeyAuth("sk-..."), base_url=None, timeout=timeout)
    aclient = build_async_client(FIRST_PARTY, ApiKeyAuth("sk-..."), base_url=None, timeout=...)

Every module that uses the SDK imports this one with it, so the SDK's loggers are held at
WARNING (:func:`gateway.logging.hold_sdk_loggers`) as soon as the SDK's import-time logging
set-up has run: ``ANTHROPIC_LOG=debug`` or a host's DEBUG root logger cannot make the SDK log
the ``Authorization`` header or the prompt.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anthropic
import httpx2

from gateway.logging import hold_sdk_loggers
from gateway.providers.wire._announce import aannounce_wire, announce_wire, target_announcers
from gateway.providers.wire._profile import SDK_TELEMETRY_PREFIX, WireAuth, WireProfile
from gateway.providers.wire._transport import async_http_client

# The SDK's import just ran its logging set-up (ANTHROPIC_LOG=debug lowers its loggers to
# DEBUG), so this is the first moment they can be held, and nothing has been sent yet.
hold_sdk_loggers()

__all__ = [
    "NO_SDK_TRACING",
    "announcers",
    "build_async_client",
    "build_client",
    "client_options",
    "header_strippers",
    "url_memo_supported",
]

# The SDK's own tracing off, whatever ANTHROPIC_OPEN_TELEMETRY* say: with its content mode set
# by the environment its spans would carry prompt and answer text, which go to the audit
# database only (the gateway's own span, gateway serve --otel, carries none); its trace header
# would be stripped before sending anyway (the profile's allowed headers). Off, it also saves
# about 65 us of CPU per upstream call (bench/results/server.md). For every client, the
# capture's too.
NO_SDK_TRACING: Any = {"traces": {"enabled": False}, "propagation": False}


def client_options(
    profile: WireProfile, auth: WireAuth, *, base_url: str | None, timeout: httpx2.Timeout
) -> dict[str, Any]:
    """The SDK constructor's options: explicit credentials stop the SDK reading them from the
    environment, profiles and config files; an explicit base URL stops it reading one (each
    transport's client reads its own variable), so a transport without a default URL (one per
    region) must be given one."""
    url = base_url or profile.default_base_url
    if url is None:
        raise ValueError(f"the {profile.name} transport needs a base URL")
    return {
        **auth.client_options(),
        "base_url": url,
        "timeout": timeout,
        "max_retries": 0,  # the gateway owns retries, so that every attempt is recorded
        "open_telemetry": NO_SDK_TRACING,
    }


# Headers the gateway lets onto the wire. The SDK constructor reads ANTHROPIC_CUSTOM_HEADERS
# whatever we pass, so anything the profile does not allow is removed just before sending: a
# compliance gateway sends what it chose, nothing an environment variable added.
def header_strippers(
    profile: WireProfile,
) -> tuple[Callable[[httpx2.Request], None], Callable[[httpx2.Request], Any]]:
    """The sync and async request hooks that strip what ``profile`` does not allow."""
    allowed = profile.wire_headers

    def strip(request: httpx2.Request) -> None:
        for name in list(request.headers.keys()):
            lowered = name.lower()
            if lowered not in allowed and not lowered.startswith(SDK_TELEMETRY_PREFIX):
                del request.headers[name]

    async def astrip(request: httpx2.Request) -> None:
        strip(request)

    return strip, astrip


# Typed as the SDK client so the memo can call the SDK's own step; at run time a mixin, put in
# front of the client class only when that step is there as it is called (url_memo_supported).
if TYPE_CHECKING:
    _MemoBase = anthropic.Anthropic
else:
    _MemoBase = object


class _UrlMemo(_MemoBase):
    """The SDK parses the same relative URL against the same base URL into the same URL on
    every request (about 22 us); the result is kept for the client's current base URL
    (``URL`` objects are immutable, and a new base URL is a new object)."""

    _url_memo: tuple[str, object, httpx2.URL] | None = None

    def _prepare_url(self, url: str) -> httpx2.URL:
        base = getattr(self, "_base_url", None)
        memo = self._url_memo
        if memo is not None and memo[0] == url and memo[1] is base and base is not None:
            return memo[2]
        prepared = super()._prepare_url(url)
        self._url_memo = (url, base, prepared)
        return prepared


def url_memo_supported(sdk_client: type[Any]) -> bool:
    """Whether ``sdk_client._prepare_url`` is a plain method taking one URL (else no memo)."""
    method = getattr(sdk_client, "_prepare_url", None)
    if not inspect.isfunction(method) or inspect.iscoroutinefunction(method):
        return False
    try:
        inspect.signature(method).bind(None, "/v1/messages")
    except TypeError:
        return False
    return True


C = TypeVar("C")


# One class per SDK client class: every client built from it has the same type.
_MEMO_CLASSES: dict[type[Any], type[Any]] = {}


def _with_url_memo(sdk_client: type[C]) -> type[C]:
    memo_class = _MEMO_CLASSES.get(sdk_client)
    if memo_class is None:
        built = sdk_client
        if url_memo_supported(sdk_client):
            built = type(sdk_client.__name__, (_UrlMemo, sdk_client), {})
        memo_class = _MEMO_CLASSES.setdefault(sdk_client, built)  # the first one built wins
    return cast("type[C]", memo_class)


def announcers(
    profile: WireProfile, auth: WireAuth
) -> tuple[Callable[[httpx2.Request], None], Callable[[httpx2.Request], Any]]:
    """The sync and async hooks that tell ``on_wire`` the bytes (and, where the URL names the
    model, the target)."""
    if profile.model_in_url:
        return target_announcers(auth.region)
    return announce_wire, aannounce_wire


def build_client(
    profile: WireProfile, auth: WireAuth, *, base_url: str | None, timeout: httpx2.Timeout
) -> anthropic.Anthropic:
    strip, _ = header_strippers(profile)
    announce, _ = announcers(profile, auth)
    http = anthropic.DefaultHttpxClient(
        event_hooks={"request": [strip, announce]},
        # A redirect would send another request (a 303 turns the POST into a bodiless GET to
        # wherever it points) than the one recorded: a 3xx is the upstream's answer instead.
        follow_redirects=False,
    )
    options = client_options(profile, auth, base_url=base_url, timeout=timeout)
    return _with_url_memo(profile.sync_client)(**options, http_client=http)


def build_async_client(
    profile: WireProfile, auth: WireAuth, *, base_url: str | None, timeout: httpx2.Timeout
) -> anthropic.AsyncAnthropic:
    _, astrip = header_strippers(profile)
    _, aannounce = announcers(profile, auth)
    http = async_http_client({"request": [astrip, aannounce]})
    options = client_options(profile, auth, base_url=base_url, timeout=timeout)
    return _with_url_memo(profile.async_client)(**options, http_client=http)
