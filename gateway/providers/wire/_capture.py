"""The wire capture: the exact body bytes the SDK puts on the wire, produced by the SDK itself.

    capture = WireCapture()
    capture.wire_bytes({"model": "m", "max_tokens": 5, "messages": [...]})  # b'{"max_...
    capture.close()

The provider records these bytes as the request before it sends anything, so they must be the
SDK's own: :class:`WireCapture` runs the SDK's serialisation against clients that keep the
bytes and send nothing, by a fast path through the SDK's private request-building steps when
they are there and agree with the public path, and by the public path otherwise.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import anthropic
import httpx2

from gateway.errors import ConfigurationError
from gateway.providers.wire._body import split_body
from gateway.providers.wire._sdk import NO_SDK_TRACING

__all__ = ["PROBES", "WireCapture", "fast_path_supported"]


class _BodyCaptured(Exception):
    def __init__(self, content: bytes) -> None:
        self.content = content
        super().__init__("request body captured; not sent")


class _CaptureTransport(httpx2.BaseTransport):
    """A transport that records the request the SDK built and sends nothing."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        raise _BodyCaptured(request.read())


class _CaptureHttpClient(anthropic.DefaultHttpxClient):
    """Stops at the first point where the SDK has the body bytes, so nothing after it runs.

    The SDK serialises the JSON body itself and hands httpx the finished bytes as
    ``content``; httpx sends bytes ``content`` verbatim, so those are the wire bytes. Stopping
    there skips building an httpx request, the transport, and the SDK's error wrapping, which
    were most of the cost. Any other shape of body (not bytes) goes on to the capture
    transport.
    """

    def build_request(self, *args: Any, **kwargs: Any) -> httpx2.Request:
        content = kwargs.get("content")
        if isinstance(content, bytes) and not any(kwargs.get(k) for k in ("data", "files", "json")):
            raise _BodyCaptured(content)
        return super().build_request(*args, **kwargs)


class _NotCaptured(Exception):
    """The fast path's steps ran to the end without handing httpx the body."""


# Typed as the SDK client so the hooks can call the SDK's own steps; at run time a mixin,
# put in front of whichever client class the capture is built from.
if TYPE_CHECKING:
    _HooksBase = anthropic.Anthropic
else:
    _HooksBase = object


class _FastPathHooks(_HooksBase):
    """Runs only the SDK's request-building steps for the body, in the SDK's own order.

    ``request()`` would copy and prepare the options (body merge and preparation), then, per
    attempt, ``_prepare_options`` and ``_build_request`` (which serialises the body and hands
    it to httpx, where :class:`_CaptureHttpClient` keeps it). Those are the steps that shape
    the body; the retry loop, idempotency key, tracing span and middleware around them only
    touch headers and bookkeeping, and cost more than the steps themselves. These are private
    SDK methods: :func:`fast_path_supported` checks them before this class is used, and
    :class:`WireCapture` falls back to the SDK's public path whenever they fail.
    """

    _url: tuple[str, httpx2.URL] | None = None
    _headers: httpx2.Headers | None = None

    # The URL and the headers never reach the captured bytes, and neither depends on the body:
    # each is built once, by the SDK, and reused (headers as a copy: _build_request may edit).
    def _prepare_url(self, url: str) -> httpx2.URL:
        if self._url is None or self._url[0] != url:
            self._url = (url, super()._prepare_url(url))
        return self._url[1]

    def _build_headers(self, options: Any, *, retries_taken: int = 0) -> httpx2.Headers:
        if self._headers is None:
            self._headers = super()._build_headers(options, retries_taken=retries_taken)
        return self._headers.copy()

    def request(self, cast_to: Any, options: Any, **kwargs: Any) -> Any:
        prepared = self._prepare_options(self._copy_and_prepare(options))
        self._build_request(prepared, retries_taken=0)  # raises _BodyCaptured
        raise _NotCaptured


# How the fast path calls each private SDK method: (positional arguments after self, keywords).
_FAST_PATH_CALLS: dict[str, tuple[int, tuple[str, ...]]] = {
    "_copy_and_prepare": (1, ()),
    "_prepare_options": (1, ()),
    "_build_request": (1, ("retries_taken",)),
    "_prepare_url": (1, ()),
    "_build_headers": (1, ("retries_taken",)),
}


def fast_path_supported(sdk_client: type[anthropic.Anthropic]) -> bool:
    """Whether ``sdk_client`` has every private method the fast path calls, callable as it
    calls them (a plain method taking the same arguments). A release that renamed or
    reshaped one gets the public path instead."""
    for name, (positional, keywords) in _FAST_PATH_CALLS.items():
        method = getattr(sdk_client, name, None)
        if not inspect.isfunction(method) or inspect.iscoroutinefunction(method):
            return False
        try:
            inspect.signature(method).bind(None, *[None] * positional, **dict.fromkeys(keywords))
        except TypeError:
            return False
    return True


_FIRST_PARTY_CREDENTIALS: Mapping[str, Any] = {"api_key": "capture-only"}
_CAPTURE_OPTIONS: dict[str, Any] = {
    "base_url": "http://capture.invalid",
    "max_retries": 0,
    "timeout": httpx2.Timeout(60.0),
    "open_telemetry": NO_SDK_TRACING,
}
_CAPTURE_TIMEOUT = 60.0

# Bodies the two paths must agree on before the fast one is trusted: typed fields, system
# blocks, extra_body fields (merged by the SDK), nested unknown fields, and a stream.
PROBES: tuple[dict[str, Any], ...] = (
    {
        "model": "probe",
        "max_tokens": 1,
        "system": [{"type": "text", "text": "s"}],
        "messages": [{"role": "user", "content": "p \u00e9 \u2603"}],
        "stop_sequences": ["x"],
        "temperature": 0.5,
        "future_field": {"b": [1.0, None], "a": True},
    },
    {
        "model": "probe",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "p"}]}],
        "stream": True,
        "top_k": 1,
    },
)


class WireCapture:
    """The exact body bytes the SDK puts on the wire for a body, produced by the SDK itself.

        capture = WireCapture()
        capture.wire_bytes({"model": "m", "max_tokens": 5, "messages": [...]})  # b'{"max_...

    The SDK's own serialisation runs (same ``create()`` call, same JSON encoder) against
    clients that keep the bytes and send nothing, so the bytes cannot drift from ``send()``.
    Two ways, one answer: the fast path runs only the SDK's body-building steps (private
    methods, a fraction of the cost); the public path runs the whole ``create()`` into a
    transport that keeps the request. The fast path is used only when the SDK client class
    has its methods and both paths give the same bytes for every probe body; should it ever
    fail where the public path succeeds, it is switched off for good. When neither path
    produces the bytes, :class:`~gateway.errors.ConfigurationError` names the SDK release:
    the intent cannot be recorded, so nothing may be sent.

    ``sdk_client`` is the client class to build from (the transport's: the installed SDK's
    first-party client by default) and ``credentials`` its constructor's credential options,
    of the right shape and never used (nothing is sent).
    """

    def __init__(
        self,
        sdk_client: type[anthropic.Anthropic] = anthropic.Anthropic,
        credentials: Mapping[str, Any] = _FIRST_PARTY_CREDENTIALS,
    ) -> None:
        options = {**credentials, **_CAPTURE_OPTIONS}
        self._public = sdk_client(
            **options,
            http_client=anthropic.DefaultHttpxClient(transport=_CaptureTransport()),
        )
        self._fast_client: anthropic.Anthropic | None = None
        if fast_path_supported(sdk_client):
            self._fast_client = _fast_client_class(sdk_client)(
                **options,
                http_client=_CaptureHttpClient(transport=_CaptureTransport()),
            )
        self._fast = self._fast_client is not None and all(map(self._agree, PROBES))

    @property
    def fast(self) -> bool:
        """Whether the fast path is in use."""
        return self._fast

    def wire_bytes(self, body: Mapping[str, Any]) -> bytes:
        kwargs = split_body(body)
        if self._fast:
            content = self._fast_wire_bytes(kwargs)
            if content is not None:
                return content
        content = self._public_wire_bytes(kwargs)
        self._fast = False  # if it was on, it failed where the public path did not
        return content

    def _fast_wire_bytes(self, kwargs: Mapping[str, Any]) -> bytes | None:
        """The fast path's bytes, or ``None`` when any of its steps failed."""
        assert self._fast_client is not None
        try:
            self._fast_client.messages.create(**kwargs, timeout=_CAPTURE_TIMEOUT)
        except _BodyCaptured as captured:
            return captured.content
        except Exception:  # noqa: BLE001 - a private step failed: the public path decides
            return None
        return None  # create() returned: the hooks were never reached

    def _public_wire_bytes(self, kwargs: Mapping[str, Any]) -> bytes:
        try:
            self._public.messages.create(**kwargs, timeout=_CAPTURE_TIMEOUT)
        except _BodyCaptured as captured:
            return captured.content
        except Exception as exc:
            if isinstance(exc.__cause__, _BodyCaptured):  # the SDK wraps transport errors
                return exc.__cause__.content
            raise _cannot_capture(type(exc).__name__) from exc
        raise _cannot_capture("create() returned without sending")

    def _agree(self, probe: Mapping[str, Any]) -> bool:
        kwargs = split_body(probe)
        fast = self._fast_wire_bytes(kwargs)
        try:
            return fast is not None and fast == self._public_wire_bytes(kwargs)
        except ConfigurationError:  # wire_bytes() will say so, for every body
            return False

    def close(self) -> None:
        self._public.close()
        if self._fast_client is not None:
            self._fast_client.close()


def _fast_client_class(sdk_client: type[anthropic.Anthropic]) -> type[anthropic.Anthropic]:
    return cast(
        "type[anthropic.Anthropic]",
        type(f"_Capture{sdk_client.__name__}", (_FastPathHooks, sdk_client), {}),
    )


def _cannot_capture(cause: str) -> ConfigurationError:
    return ConfigurationError(
        f"the installed anthropic SDK {anthropic.__version__} did not produce the request "
        f"body ({cause}), so the gateway cannot record what it would send; nothing was sent.",
        hint="Install an anthropic release within the range pyproject.toml pins.",
    )
