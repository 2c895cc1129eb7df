"""The async lean leg's send without the SDK's per-request machinery: the SDK's headers, asked
of the SDK once per call shape, and its own HTTP client's send.

    direct = DirectPost.for_client(client)       # None: post through the SDK as before
    async with direct.open(path, wire, headers, timeout) as raw:
        ...                                        # raw.http_response, unread, as post()'s

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
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from anthropic._base_client import AsyncAPIClient
from anthropic._models import FinalRequestOptions

from gateway.providers.wire._lean import post_options

__all__ = ["DirectPost"]

# Header sets kept per client: one per (call headers, timeout) a policy set can give, so a
# handful; past this many the memo starts again rather than grow.
MAX_SHAPES = 64


@dataclass(frozen=True, slots=True)
class Opened:
    """What the provider reads of an opened call, as of the SDK's ``APIResponse``."""

    http_response: httpx2.Response


class DirectPost:
    """Posts a body's bytes through one async SDK client's HTTP client (see the module)."""

    def __init__(self, client: anthropic.AsyncAnthropic) -> None:
        self._client = client
        self._http: httpx2.AsyncClient = client._client
        self._shapes: dict[tuple[Any, ...], httpx2.Request] = {}

    @classmethod
    def for_client(cls, client: anthropic.AsyncAnthropic) -> DirectPost | None:
        """A direct post for ``client``, or None where its headers are not fixed by its
        construction or the SDK steps it relies on are not there as they are called."""
        kind = type(client)
        steps = ("_build_request", "_prepare_options", "_make_status_error_from_response")
        if not all(inspect.isfunction(getattr(kind, step, None)) for step in steps):
            return None
        if client.custom_auth is not None:
            return None
        if getattr(kind, "_prepare_request", None) is not AsyncAPIClient._prepare_request:
            return None  # the client changes each request itself (signs it, adds a token)
        if not isinstance(getattr(client, "_client", None), httpx2.AsyncClient):
            return None
        return cls(client)

    @asynccontextmanager
    async def open(
        self, path: str, wire: bytes, headers: Mapping[str, Any], timeout: httpx2.Timeout
    ) -> AsyncIterator[Opened]:
        """``wire`` posted to ``path``, as ``client.post`` would post it: the unread answer."""
        shape = await self._shape(path, headers, timeout)
        request = self._http.build_request(
            "POST",
            shape.url,
            headers=shape.headers,
            content=wire,
            timeout=timeout,
            extensions={k: v for k, v in shape.extensions.items() if k != "timeout"},
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx2.TimeoutException as exc:
            raise anthropic.APITimeoutError(request=request) from exc
        except anthropic.AnthropicError:
            raise
        except Exception as exc:
            raise anthropic.APIConnectionError(request=request) from exc
        try:
            if not response.is_success:
                await response.aread()
                raise self._client._make_status_error_from_response(response) from None
            yield Opened(response)
        finally:
            await response.aclose()

    async def _shape(
        self, path: str, headers: Mapping[str, Any], timeout: httpx2.Timeout
    ) -> httpx2.Request:
        """The request the SDK builds for these headers and timeout (its body left empty)."""
        key = (path, _frozen(headers), tuple(sorted(timeout.as_dict().items())))
        shape = self._shapes.get(key)
        if shape is None:
            if len(self._shapes) >= MAX_SHAPES:
                self._shapes.clear()
            options = FinalRequestOptions.construct(
                method="post",
                url=path,
                json_data=None,
                content=b"",
                **post_options(headers, timeout),
            )
            options = await self._client._prepare_options(options)
            shape = self._client._build_request(options)
            del shape.headers["content-length"]  # the body's own is set per call
            self._shapes[key] = shape
        return shape


def _frozen(headers: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    # A value that is not a string (an Omit: a header the call removes) is keyed by its kind.
    return tuple((k, v if isinstance(v, str) else repr(type(v))) for k, v in headers.items())
