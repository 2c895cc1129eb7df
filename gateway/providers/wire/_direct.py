"""The lean leg's send without the SDK's per-request machinery: the SDK's headers, asked of the
SDK once per call shape, and its own HTTP client's send.

    direct = DirectPost.for_client(client)       # None: post through the SDK as before
    with direct.open(path, wire, headers, timeout) as raw:
        ...                                        # raw.http_response, unread, as post()'s
    adirect = AsyncDirectPost.for_client(aclient)  # the same for the async client
    async with adirect.open(path, wire, headers, timeout) as raw: ...

The SDK's ``post`` builds a request-options model for every request, copies it twice, merges
three layers of headers, makes an idempotency key the Messages API is not sent, and wraps the
answer in an ``APIResponse``: about 0.3 ms of CPU per call (bench/results/throughput.md,
"The direct post"), more than its HTTP client's whole send. For a client whose headers are
fixed by its construction (Anthropic's own API with an explicit key: no ``custom_auth``, no
request preparation of its own, as Bedrock's signing and Vertex's tokens are), the headers
the SDK sends depend only on the call's headers and its timeout, so they are built by the
SDK's own ``_build_request`` once for each such pair and kept. Each call is then the SDK's
httpx client's ``build_request`` and ``send``: the same request hooks (the header strip,
``on_wire``, the write timeout), transport and proxy mounts, no redirects, and the SDK's own
failure mapping: a time-out is ``APITimeoutError``, any other failure to send
``APIConnectionError`` (from the httpx error, which names the cause), a status other than
2xx the SDK's status error built from the read answer.
tests/providers/test_lean_leg.py holds the headers and bytes equal to ``create()``'s.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic._base_client import AsyncAPIClient, SyncAPIClient
from anthropic._models import FinalRequestOptions

from gateway.providers.wire._lean import post_options

__all__ = ["AsyncDirectPost", "DirectPost"]

# Header sets kept per client: one per (call headers, timeout) a policy set can give, so a
# handful; past this many the memo starts again rather than grow.
MAX_SHAPES = 64

_SDK_STEPS = ("_build_request", "_prepare_options", "_make_status_error_from_response")


@dataclass(frozen=True, slots=True)
class Opened:
    """What the provider reads of an opened call, as of the SDK's ``APIResponse``."""

    http_response: httpx2.Response


def _fixed_headers(client: Any, own_prepare: Any) -> bool:
    """Whether ``client``'s headers are fixed by its construction and the SDK steps the direct
    post relies on are there as it calls them."""
    kind = type(client)
    return (
        all(inspect.isfunction(getattr(kind, step, None)) for step in _SDK_STEPS)
        and client.custom_auth is None
        # A client of its own request preparation signs each request or adds a token to it.
        and getattr(kind, "_prepare_request", None) is own_prepare
        and isinstance(getattr(client, "_client", None), httpx2.Client | httpx2.AsyncClient)
    )


def _key(path: str, headers: Mapping[str, Any], timeout: httpx2.Timeout) -> tuple[Any, ...]:
    # A value that is not a string (an Omit: a header the call removes) is keyed by its kind.
    named = tuple((k, v if isinstance(v, str) else repr(type(v))) for k, v in headers.items())
    return path, named, tuple(sorted(timeout.as_dict().items()))


def _options(path: str, headers: Mapping[str, Any], timeout: httpx2.Timeout) -> Any:
    return FinalRequestOptions.construct(
        method="post", url=path, json_data=None, content=b"", **post_options(headers, timeout)
    )


def _kept(shapes: dict[tuple[Any, ...], httpx2.Request], key: Any, shape: httpx2.Request) -> None:
    if len(shapes) >= MAX_SHAPES:
        shapes.clear()
    shape.headers.pop("content-length", None)  # the body's own is set per call
    shapes[key] = shape


def _request(
    http: httpx2.Client | httpx2.AsyncClient,
    shape: httpx2.Request,
    wire: bytes,
    timeout: httpx2.Timeout,
) -> httpx2.Request:
    return http.build_request(
        "POST",
        shape.url,
        headers=shape.headers,
        content=wire,
        timeout=timeout,
        extensions={k: v for k, v in shape.extensions.items() if k != "timeout"},
    )


def _send_failure(exc: Exception, request: httpx2.Request) -> Exception:
    """The SDK's error for a send that raised ``exc`` (raised ``from exc``, naming the cause)."""
    if isinstance(exc, httpx2.TimeoutException):
        return anthropic.APITimeoutError(request=request)
    if isinstance(exc, anthropic.AnthropicError):
        return exc
    return anthropic.APIConnectionError(request=request)


class DirectPost:
    """Posts a body's bytes through one SDK client's HTTP client (see the module)."""

    def __init__(self, client: anthropic.Anthropic) -> None:
        self._client = client
        self._http: httpx2.Client = client._client
        self._shapes: dict[tuple[Any, ...], httpx2.Request] = {}

    @classmethod
    def for_client(cls, client: anthropic.Anthropic) -> DirectPost | None:
        """A direct post for ``client``, or None (post through the SDK)."""
        return cls(client) if _fixed_headers(client, SyncAPIClient._prepare_request) else None

    @contextmanager
    def open(
        self, path: str, wire: bytes, headers: Mapping[str, Any], timeout: httpx2.Timeout
    ) -> Iterator[Opened]:
        """``wire`` posted to ``path``, as ``client.post`` would post it: the unread answer."""
        key = _key(path, headers, timeout)
        shape = self._shapes.get(key)
        if shape is None:
            options = self._client._prepare_options(_options(path, headers, timeout))
            shape = self._client._build_request(options)
            _kept(self._shapes, key, shape)
        request = _request(self._http, shape, wire, timeout)
        try:
            response = self._http.send(request, stream=True)
        except Exception as exc:
            raise _send_failure(exc, request) from exc
        try:
            if not response.is_success:
                response.read()
                raise self._client._make_status_error_from_response(response) from None
            yield Opened(response)
        finally:
            response.close()


class AsyncDirectPost:
    """:class:`DirectPost` for the async SDK client."""

    def __init__(self, client: anthropic.AsyncAnthropic) -> None:
        self._client = client
        self._http: httpx2.AsyncClient = client._client
        self._shapes: dict[tuple[Any, ...], httpx2.Request] = {}

    @classmethod
    def for_client(cls, client: anthropic.AsyncAnthropic) -> AsyncDirectPost | None:
        """A direct post for ``client``, or None (post through the SDK)."""
        return cls(client) if _fixed_headers(client, AsyncAPIClient._prepare_request) else None

    @asynccontextmanager
    async def open(
        self, path: str, wire: bytes, headers: Mapping[str, Any], timeout: httpx2.Timeout
    ) -> AsyncIterator[Opened]:
        """:meth:`DirectPost.open` for the async client."""
        key = _key(path, headers, timeout)
        shape = self._shapes.get(key)
        if shape is None:
            options = await self._client._prepare_options(_options(path, headers, timeout))
            shape = self._client._build_request(options)
            _kept(self._shapes, key, shape)
        request = _request(self._http, shape, wire, timeout)
        try:
            response = await self._http.send(request, stream=True)
        except Exception as exc:
            raise _send_failure(exc, request) from exc
        try:
            if not response.is_success:
                await response.aread()
                raise self._client._make_status_error_from_response(response) from None
            yield Opened(response)
        finally:
            await response.aclose()
