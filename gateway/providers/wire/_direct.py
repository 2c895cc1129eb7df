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
fixed by its construction (Anthropic's own client class with an explicit key, every step that
decides headers its own: not Bedrock's signing, Vertex's tokens or Foundry's Azure AD token)
and whose ``post`` would send once and do nothing else (no SDK retries, middleware, tracing or
idempotency key: how the wire layer builds every client), the headers the SDK sends depend
only on the call's headers and its timeout, so they are built by the SDK's own
``_build_request`` once for each such pair and kept (per client, at most ``MAX_SHAPES``: a
caller whose every call has a timeout of its own would rebuild them each time). Each call is
then the SDK's httpx client's ``build_request`` and ``send``: the same request hooks (the
header strip, ``on_wire``, the write timeout), transport and proxy mounts, no redirects, and
the SDK's own failure mapping: a time-out is ``APITimeoutError``, any other failure to send
``APIConnectionError`` (from the httpx error, which names the cause), an SDK error as it is,
a status other than 2xx the SDK's status error built from the read answer. The answer is
closed when the call ends, read or not. tests/providers/test_direct_post.py holds the headers
(timeouts included) and bytes equal to ``create()``'s, sync and async.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic._models import FinalRequestOptions

from gateway.providers.wire._lean import post_options

__all__ = ["AsyncDirectPost", "DirectPost"]

# Header sets kept per client: one per (call headers, timeout) a policy set can give, so a
# handful; past this many the memo starts again rather than grow.
MAX_SHAPES = 64

# The SDK steps that decide a request's headers, or that the direct post calls: each must be
# Anthropic's own client's, so that the headers depend on the call's headers and timeout only
# (a client that mints a token in `_prepare_options`, as Foundry's with an Azure AD token
# provider does, or signs in `_prepare_request`, as Bedrock's and Vertex's do, is left to the
# SDK's `post`).
_SDK_STEPS = (
    "_prepare_options",
    "_prepare_request",
    "_build_headers",
    "_build_request",
    "_make_status_error_from_response",
    "default_headers",
    "auth_headers",
    "custom_auth",
)


@dataclass(frozen=True, slots=True)
class Opened:
    """What the provider reads of an opened call, as of the SDK's ``APIResponse``."""

    http_response: httpx2.Response


def _fixed_headers(client: Any, sdk_class: type[Any]) -> bool:
    """Whether ``client``'s headers are fixed by its construction (see ``_SDK_STEPS``) and its
    ``post`` would do nothing but send once: no retries, middleware, tracing or idempotency key
    (the wire layer builds every client so)."""
    kind = type(client)
    return (
        isinstance(client, sdk_class)
        and all(
            inspect.getattr_static(kind, step, None) is inspect.getattr_static(sdk_class, step)
            for step in _SDK_STEPS
        )
        and client.custom_auth is None
        and client.max_retries == 0
        and not getattr(client, "_middleware", ())
        and getattr(client, "_tracer", None) is None
        and getattr(client, "_idempotency_header", None) is None
        and isinstance(getattr(client, "_client", None), httpx2.Client | httpx2.AsyncClient)
    )


def _key(path: str, headers: Mapping[str, Any], timeout: httpx2.Timeout) -> tuple[Any, ...]:
    # A value that is not a string (an Omit: a header the call removes) is keyed by its kind;
    # the timeout by how the SDK writes it into its headers (600 and 600.0 are two).
    named = tuple((k, v if isinstance(v, str) else repr(type(v))) for k, v in headers.items())
    return path, named, repr(sorted(timeout.as_dict().items()))


def _options(path: str, headers: Mapping[str, Any], timeout: httpx2.Timeout) -> Any:
    return FinalRequestOptions.construct(
        method="post", url=path, json_data=None, content=b"", **post_options(headers, timeout)
    )


def _remember_shape(
    shapes: dict[tuple[Any, ...], httpx2.Request], key: Any, shape: httpx2.Request
) -> None:
    if len(shapes) >= MAX_SHAPES:
        shapes.clear()
    # Set per call: the body's own length, and the timeout (build_request adds it to a copy).
    shape.headers.pop("content-length", None)
    shape.extensions.pop("timeout", None)
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
        extensions=shape.extensions,
    )


def _send_failure(exc: Exception, request: httpx2.Request) -> Exception:
    """The SDK's error for a send that raised ``exc`` (raised ``from exc``, naming the cause);
    an SDK error is raised as it is, before this."""
    if isinstance(exc, httpx2.TimeoutException):
        return anthropic.APITimeoutError(request=request)
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
        return cls(client) if _fixed_headers(client, anthropic.Anthropic) else None

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
            _remember_shape(self._shapes, key, shape)
        request = _request(self._http, shape, wire, timeout)
        try:
            response = self._http.send(request, stream=True)
        except anthropic.AnthropicError:
            raise  # the SDK's own error, with its own cause
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
        return cls(client) if _fixed_headers(client, anthropic.AsyncAnthropic) else None

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
            _remember_shape(self._shapes, key, shape)
        request = _request(self._http, shape, wire, timeout)
        try:
            response = await self._http.send(request, stream=True)
        except anthropic.AnthropicError:
            raise  # the SDK's own error, with its own cause
        except Exception as exc:
            raise _send_failure(exc, request) from exc
        try:
            if not response.is_success:
                await response.aread()
                raise self._client._make_status_error_from_response(response) from None
            yield Opened(response)
        finally:
            await response.aclose()
