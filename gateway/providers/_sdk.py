"""The seam to the ``anthropic`` SDK: explicit clients, quiet loggers, one error boundary.

    client = build_client(api_key="sk-...", base_url=None, timeout=timeout)
    kwargs = split_body({"model": "m", "max_tokens": 5, "messages": [...], "temperature": 0})
    # -> typed create() arguments, plus extra_body={"temperature": 0}
    failure = classify(exc, secrets=("sk-...",))   # any SDK error -> Failure (no prompt text)

Everything here exists so that the provider never guesses at what the SDK did: the client reads
no ANTHROPIC_* setting it was not given, and each SDK exception becomes one plain
:class:`Failure` in one place. The exact body bytes come from :mod:`gateway.providers._capture`.

Every module that uses the SDK imports this one with it, so the SDK's loggers are held at
WARNING (:func:`gateway.logging.hold_sdk_loggers`) as soon as the SDK's import-time logging
set-up has run: ``ANTHROPIC_LOG=debug`` or a host's DEBUG root logger cannot make the SDK log
the ``Authorization`` header or the prompt.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    ExitStack,
    asynccontextmanager,
    contextmanager,
)
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anthropic
import httpx2
from anthropic.lib.streaming import MessageStream
from anthropic.resources.messages import Messages
from anthropic.types import RawMessageStreamEvent

from gateway.errors import ConfigurationError
from gateway.logging import hold_sdk_loggers
from gateway.providers._retry import is_retryable, parse_retry_after
from gateway.providers._transport import async_http_client, cause_name

# The SDK's import just ran its logging set-up (ANTHROPIC_LOG=debug lowers its loggers to
# DEBUG), so this is the first moment they can be held, and nothing has been sent yet.
hold_sdk_loggers()

DEFAULT_BASE_URL = "https://api.anthropic.com"

# Headers the gateway lets onto the wire. ANTHROPIC_CUSTOM_HEADERS is read by the SDK
# constructor whatever we pass, so anything outside this list is removed just before sending:
# a compliance gateway sends what it chose, nothing an environment variable added.
ALLOWED_HEADERS = frozenset(
    {
        "host",
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "user-agent",
        "authorization",
        "anthropic-version",
    }
)
_SDK_TELEMETRY_PREFIX = "x-stainless-"  # SDK version, OS and retry count: no secrets, no content

# create() arguments that become body fields. Derived from the installed SDK so a new typed field
# is picked up; header-valued arguments and the SDK's own options are not body fields.
_NOT_BODY = frozenset(
    {
        "self",
        "extra_headers",
        "extra_query",
        "extra_body",
        "timeout",
        "user_profile_id",
        "workspace_id",
    }
)
TYPED_BODY_FIELDS = frozenset(inspect.signature(Messages.create).parameters) - _NOT_BODY
# What the counting endpoint reads (messages.count_tokens): everything that makes up the input.
# Output controls (max_tokens, stop_sequences, sampling) and routing (metadata, inference_geo,
# service_tier) do not change the count, and the endpoint refuses them.
COUNT_BODY_FIELDS = frozenset(inspect.signature(Messages.count_tokens).parameters) - _NOT_BODY


class MalformedResponse(Exception):
    """HTTP 200 whose body is not a Messages API message; raised by the provider."""

    error_type = "malformed_response"

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        super().__init__("the upstream answered 200 with a body that is not a message")


class TruncatedResponse(Exception):
    """A 2xx whose body broke off while the provider read it (the upstream did the work)."""

    error_type = "truncated_response"

    def __init__(self, response: httpx2.Response, cause: Exception) -> None:
        self.response = response
        self.cause = cause_name(cause)
        super().__init__(f"the upstream's {response.status_code} body broke off ({self.cause})")


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the retry loop needs it."""

    status: int | None
    error_type: str
    message: str  # type, status, upstream request id and fixed text: safe to print and log
    upstream_request_id: str | None
    retry_after_s: float | None
    retryable: bool
    request_bytes: bytes | None
    upstream_message: str | None = None  # the upstream's words: may echo the prompt


def split_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """``messages.create`` keyword arguments that put exactly ``body`` on the wire.

    Fields ``create()`` knows go as arguments; the rest (``temperature``, ``top_p``, ``top_k``,
    which SDK 2.x removed, and anything newer than the SDK) go through ``extra_body``.
    """
    typed = {k: v for k, v in body.items() if k in TYPED_BODY_FIELDS}
    extra = {k: v for k, v in body.items() if k not in TYPED_BODY_FIELDS}
    return {**typed, "extra_body": extra} if extra else typed


def count_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a planned body ``messages.count_tokens`` takes (:data:`COUNT_BODY_FIELDS`)."""
    return {k: v for k, v in body.items() if k in COUNT_BODY_FIELDS}


def _strip_unchosen_headers(request: httpx2.Request) -> None:
    for name in list(request.headers.keys()):
        lowered = name.lower()
        if lowered not in ALLOWED_HEADERS and not lowered.startswith(_SDK_TELEMETRY_PREFIX):
            del request.headers[name]


async def _astrip_unchosen_headers(request: httpx2.Request) -> None:
    _strip_unchosen_headers(request)


# -- the bytes about to be sent, announced to whoever records them ------------------------------
#
# The SDK builds each request once; its httpx client runs the "request" event hooks on the
# finished request just before the transport writes it. There the body is the exact bytes
# that go on the wire, so the hook hands them to the call's ``on_wire`` (the recorder commits
# the intent with them) and the send goes on only once that returned. The hook is public
# httpx API, so no private SDK step is involved. ``on_wire`` belongs to one call: it is set
# in a context variable only while that call's request is being built and sent (the SDK
# sends on entering ``with_streaming_response.create``), so other requests of the same
# client (a token count) and other tasks never see it.

OnWire = Callable[[bytes], object]  # may return an awaitable (the async client awaits it)
_ON_WIRE: ContextVar[OnWire | None] = ContextVar("gateway_on_wire", default=None)
T = TypeVar("T")


class NotSent(BaseException):
    """``on_wire`` raised, so the request was not sent; ``error`` is what it raised.

    A BaseException so that it passes through the SDK, which would otherwise turn any
    exception from sending into a connection error (that the provider might retry)."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        super().__init__("the request's bytes were not accepted: not sent")


def _wire_of(request: httpx2.Request) -> bytes:
    try:
        return request.content
    except httpx2.RequestNotRead:  # a body the SDK streams: it cannot be recorded first
        raise NotSent(
            ConfigurationError(
                f"the installed anthropic SDK {anthropic.__version__} built a request whose "
                "body is not in memory, so the gateway cannot record what it would send; "
                "nothing was sent.",
                hint="Install an anthropic release within the range pyproject.toml pins.",
            )
        ) from None


def _announce_wire(request: httpx2.Request) -> None:
    on_wire = _ON_WIRE.get()
    if on_wire is None:
        return
    content = _wire_of(request)
    try:
        on_wire(content)
    except Exception as exc:
        raise NotSent(exc) from exc


async def _aannounce_wire(request: httpx2.Request) -> None:
    on_wire = _ON_WIRE.get()
    if on_wire is None:
        return
    content = _wire_of(request)
    try:
        outcome = on_wire(content)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception as exc:
        raise NotSent(exc) from exc


class _Announcement:
    """``on_wire``, noting that it was called. A release that sends later than on entering
    its call (outside the hook's window), or past httpx's hooks, would otherwise send
    unrecorded: entering without the announcement is an error, and in the first case
    nothing has been sent yet."""

    __slots__ = ("made", "on_wire")

    def __init__(self, on_wire: OnWire) -> None:
        self.on_wire = on_wire
        self.made = False

    def __call__(self, content: bytes) -> object:
        self.made = True
        return self.on_wire(content)

    def check(self) -> None:
        if not self.made:
            raise ConfigurationError(
                f"the installed anthropic SDK {anthropic.__version__} did not hand the request "
                "to the gateway before sending it (through httpx's request hook, on entering "
                "its call), so it could not be recorded first; its answer is not used.",
                hint="Install an anthropic release within the range pyproject.toml pins.",
            )


@contextmanager
def sending(opening: AbstractContextManager[T], on_wire: OnWire | None) -> Iterator[T]:
    """Enter ``opening`` (an SDK call that sends on entry) with ``on_wire`` told the body's
    bytes before they are sent; an ``on_wire`` error is raised as itself, nothing sent."""
    announcement = None if on_wire is None else _Announcement(on_wire)
    with ExitStack() as stack:
        token = _ON_WIRE.set(announcement)
        try:
            opened = stack.enter_context(opening)
        except NotSent as exc:
            raise exc.error from exc.error.__cause__  # as on_wire raised it
        finally:
            _ON_WIRE.reset(token)
        if announcement is not None:
            announcement.check()
        yield opened


def calling(call: Callable[[], T], on_wire: OnWire | None) -> T:
    """:func:`sending` for an SDK call that sends and returns its parsed answer at once
    (``messages.count_tokens``): ``on_wire`` is told the bytes before they are sent."""

    @contextmanager
    def now() -> Iterator[T]:
        yield call()

    with sending(now(), on_wire) as answer:
        return answer


@asynccontextmanager
async def asending(
    opening: AbstractAsyncContextManager[T], on_wire: OnWire | None
) -> AsyncIterator[T]:
    """:func:`sending` for the async client (``on_wire`` may be a coroutine function)."""
    announcement = None if on_wire is None else _Announcement(on_wire)
    async with AsyncExitStack() as stack:
        token = _ON_WIRE.set(announcement)
        try:
            opened = await stack.enter_async_context(opening)
        except NotSent as exc:
            raise exc.error from exc.error.__cause__  # as on_wire raised it
        finally:
            _ON_WIRE.reset(token)
        if announcement is not None:
            announcement.check()
        yield opened


# The SDK's own tracing off, whatever ANTHROPIC_OPEN_TELEMETRY* say: with its content mode set
# by the environment its spans would carry prompt and answer text, which go to the audit
# database only (the gateway's own span, gateway serve --otel, carries none); its trace header
# would be stripped before sending anyway (ALLOWED_HEADERS). Off, it also saves about 65 us of
# CPU per upstream call (bench/results/server.md). For every client, the capture's too.
NO_SDK_TRACING: Any = {"traces": {"enabled": False}, "propagation": False}


def client_options(
    *, api_key: str, base_url: str | None, timeout: httpx2.Timeout
) -> dict[str, Any]:
    # An explicit api_key stops the SDK reading ANTHROPIC_API_KEY / AUTH_TOKEN, profiles and
    # config files; an explicit base_url stops it reading ANTHROPIC_BASE_URL.
    return {
        "api_key": api_key,
        "base_url": base_url or DEFAULT_BASE_URL,
        "timeout": timeout,
        "max_retries": 0,  # the gateway owns retries, so that every attempt is recorded
        "open_telemetry": NO_SDK_TRACING,
    }


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


def _with_url_memo(sdk_client: type[C]) -> type[C]:
    if not url_memo_supported(sdk_client):
        return sdk_client
    return cast("type[C]", type(sdk_client.__name__, (_UrlMemo, sdk_client), {}))


_SYNC_CLIENT = _with_url_memo(anthropic.Anthropic)
_ASYNC_CLIENT = _with_url_memo(anthropic.AsyncAnthropic)


def build_client(
    *, api_key: str, base_url: str | None, timeout: httpx2.Timeout
) -> anthropic.Anthropic:
    http = anthropic.DefaultHttpxClient(
        event_hooks={"request": [_strip_unchosen_headers, _announce_wire]},
        # A redirect would send another request (a 303 turns the POST into a bodiless GET to
        # wherever it points) than the one recorded: a 3xx is the upstream's answer instead.
        follow_redirects=False,
    )
    return _SYNC_CLIENT(
        **client_options(api_key=api_key, base_url=base_url, timeout=timeout), http_client=http
    )


def build_async_client(
    *, api_key: str, base_url: str | None, timeout: httpx2.Timeout
) -> anthropic.AsyncAnthropic:
    http = async_http_client({"request": [_astrip_unchosen_headers, _aannounce_wire]})
    return _ASYNC_CLIENT(
        **client_options(api_key=api_key, base_url=base_url, timeout=timeout), http_client=http
    )


# The only words a failure message carries after its type and status: fixed text chosen here.
# The upstream's own message is never put into it: an upstream may echo any part of the request
# (a prompt of short lines, an IBAN, a name), and no filter can tell an echo from an explanation.
_DESCRIPTIONS: dict[str, str] = {
    "timeout": "the upstream did not answer in time",
    "connection_error": "the connection failed before a complete answer arrived",
    "malformed_response": "the body is not a Messages API message",
    "truncated_response": "the body broke off before it was complete; the upstream may have "
    "done the work",
    "invalid_request_error": "the upstream found the request invalid",
    "authentication_error": "the upstream did not accept the credentials",
    "permission_error": "the credentials may not use this model or feature",
    "billing_error": "the account cannot be billed",
    "not_found_error": "the upstream does not know the model or endpoint",
    "request_too_large": "the request is too large",
    "rate_limit_error": "the rate limit was reached",
    "timeout_error": "the upstream timed out",
    "conflict_error": "the upstream reported a conflict",
    "api_error": "the upstream had an internal error",
    "overloaded_error": "the upstream is overloaded",
}
_GENERIC = "the upstream reported an error"
_ERROR_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
UPSTREAM_MESSAGE_LIMIT = 2000


def _safe_error_type(value: str | None, status: int | None) -> str:
    # The type comes from the upstream too: only a plain identifier is kept.
    if value is not None and _ERROR_TYPE.fullmatch(value):
        return value
    return f"http_{status}" if status is not None else "upstream_error"


def _safe_request_id(value: str | None) -> str | None:
    return value if value is not None and _REQUEST_ID.fullmatch(value) else None


def describe(
    status: int | None, error_type: str, upstream_request_id: str | None, cause: str | None = None
) -> str:
    """The one-line, content-free description of a failed attempt."""
    where = [f"HTTP {status}" if status is not None else "no HTTP response"]
    if upstream_request_id is not None:
        where.append(f"upstream request {upstream_request_id}")
    text = _DESCRIPTIONS.get(error_type, _GENERIC)
    if cause is not None:  # a class name of our HTTP library, never upstream text
        text = f"{text} ({cause})"
    return f"{error_type} ({', '.join(where)}): {text}"


def _upstream_message(detail: str | None, secrets: Iterable[str]) -> str | None:
    """The upstream's own words, for the audit database only (prompt text may go there).

    Secrets may not go anywhere, so any secret it repeats is cut out.
    """
    if not detail:
        return None
    for secret in secrets:
        if secret:
            detail = detail.replace(secret, "[secret withheld]")
    return detail[:UPSTREAM_MESSAGE_LIMIT]


def _error_fields(payload: object) -> tuple[str | None, str | None]:
    if isinstance(payload, Mapping):
        error = payload.get("error")
        if isinstance(error, Mapping):
            kind, text = error.get("type"), error.get("message")
            return (
                kind if isinstance(kind, str) else None,
                text if isinstance(text, str) else None,
            )
    return None, None


def _request_bytes(request: httpx2.Request | None) -> bytes | None:
    if request is None:
        return None
    try:
        return request.content
    except httpx2.RequestNotRead:
        return None


def classify(exc: Exception, *, secrets: Iterable[str]) -> Failure:
    """The one boundary where SDK exceptions become the gateway's view of a failed attempt.

    Never keeps the SDK's own message: it embeds the whole response body. ``message`` holds
    only the error type, status, upstream request id and a fixed description; the upstream's
    own explanation goes to ``upstream_message`` (secrets cut out), for the audit record only.
    """
    if isinstance(exc, anthropic.APITimeoutError):
        return _no_response("timeout", None, _request_bytes(exc.request))
    if isinstance(exc, anthropic.APIConnectionError):
        cause = cause_name(exc.__cause__) if exc.__cause__ else None
        return _no_response("connection_error", cause, _request_bytes(exc.request))
    if isinstance(exc, httpx2.TransportError):
        # Only from reading an error status's body (the SDK reads it outside its own
        # wrapping when the body is streamed): the status line came, its explanation did not.
        return _no_response("connection_error", cause_name(exc), _request_bytes(_request_of(exc)))
    if isinstance(exc, anthropic.APIStatusError):
        response = exc.response
        headers = response.headers
        status = exc.status_code
        body_type, body_message = _error_fields(exc.body)
        error_type = _safe_error_type(exc.type or body_type, status)
        retryable = is_retryable(status, error_type)
        should_retry = headers.get("x-should-retry")
        if should_retry in ("true", "false") and status != 200:
            # The API says explicitly; it knows (e.g. a 409 that will not clear).
            retryable = should_retry == "true"
        request_id = _safe_request_id(exc.request_id or headers.get("request-id"))
        return Failure(
            status=status,
            error_type=error_type,
            message=describe(status, error_type, request_id),
            upstream_request_id=request_id,
            retry_after_s=parse_retry_after(headers),
            retryable=retryable,
            request_bytes=_request_bytes(response.request),
            upstream_message=_upstream_message(exc.api_message or body_message, secrets),
        )
    if isinstance(exc, MalformedResponse | TruncatedResponse):
        response = exc.response
        request_id = _safe_request_id(response.headers.get("request-id"))
        error_type = exc.error_type
        cause = exc.cause if isinstance(exc, TruncatedResponse) else None
        # Not retried: a 2xx means the upstream did the work; a second attempt could run the
        # request twice and produce a second, different answer to one recorded request.
        return Failure(
            status=response.status_code,
            error_type=error_type,
            message=describe(response.status_code, error_type, request_id, cause),
            upstream_request_id=request_id,
            retry_after_s=None,
            retryable=False,
            request_bytes=_request_bytes(response.request),
        )
    raise TypeError(f"not an upstream failure: {type(exc).__name__}")  # pragma: no cover


def _no_response(error_type: str, cause: str | None, request_bytes: bytes | None) -> Failure:
    return Failure(
        status=None,
        error_type=error_type,
        message=describe(None, error_type, None, cause),
        upstream_request_id=None,
        retry_after_s=None,
        retryable=True,
        request_bytes=request_bytes,
    )


def _request_of(exc: httpx2.TransportError) -> httpx2.Request | None:
    try:
        return exc.request
    except RuntimeError:  # httpx raises when the error was built without a request
        return None


UPSTREAM_FAILURES: tuple[type[Exception], ...] = (
    anthropic.APIError,
    MalformedResponse,
    TruncatedResponse,
    httpx2.TransportError,
)


def read_body(response: httpx2.Response) -> bytes:
    """The whole body of a 2xx, read under the provider's control.

    A body that breaks off is not a connection error: the status line says the upstream
    accepted (and likely did) the work, so it is :class:`TruncatedResponse`, never retried.
    """
    try:
        return response.read()
    except httpx2.TransportError as exc:  # peer closed early, read timeout, reset
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:  # a content-encoding that does not decode
        raise MalformedResponse(response) from None


async def aread_body(response: httpx2.Response) -> bytes:
    """:func:`read_body` for the async client."""
    try:
        return await response.aread()
    except httpx2.TransportError as exc:
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:
        raise MalformedResponse(response) from None


def parse_message(response: httpx2.Response, content: bytes) -> dict[str, Any]:
    """The JSON message in a 200 body, or :class:`MalformedResponse`."""
    try:
        parsed = json.loads(content)
    except ValueError:
        raise MalformedResponse(response) from None
    if not isinstance(parsed, dict) or parsed.get("type") != "message":
        raise MalformedResponse(response)
    return parsed


# Headers about the body's encoding on the wire; the in-memory copy holds the decoded bytes.
_WIRE_ENCODING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def assemble_stream(
    client: anthropic.Anthropic, response: httpx2.Response, content: bytes
) -> dict[str, Any]:
    """The message a 200 event stream adds up to, from its already-read (decoded) ``content``.

    The SDK does the work: its ``Stream`` decodes the events and raises an in-stream
    ``error`` event as an ``APIStatusError`` (status 200, the event's error type), and its
    ``MessageStream`` accumulates the rest. Anything else that stops the stream adding up to
    a message (an event whose data is not JSON, no ``message_start``, events out of order) is
    :class:`MalformedResponse`. The events are read from a copy of the response held in
    memory, so a reply from the sync and from the async client take this one path.
    """
    in_memory = httpx2.Response(
        response.status_code,
        headers=[
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in _WIRE_ENCODING_HEADERS
        ],
        content=content,
        request=response.request,
    )
    events: anthropic.Stream[Any] = anthropic.Stream(
        cast_to=cast(Any, RawMessageStreamEvent), response=in_memory, client=client
    )
    try:
        message = MessageStream(events, output_format=anthropic.NOT_GIVEN).get_final_message()
        return message.to_dict()
    except anthropic.APIError:  # an in-stream error event: a failed attempt of its own type
        raise
    except Exception:  # noqa: BLE001 - the bytes are all in memory: any failure is the body's
        raise MalformedResponse(response) from None


def iter_body(response: httpx2.Response) -> Iterator[bytes]:
    """A streamed 2xx body chunk by chunk, as it arrives; a body that breaks off is
    :class:`TruncatedResponse` (as in :func:`read_body`)."""
    try:
        yield from response.iter_bytes()
    except httpx2.TransportError as exc:
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:
        raise MalformedResponse(response) from None


async def aiter_body(response: httpx2.Response) -> AsyncIterator[bytes]:
    """:func:`iter_body` for the async client."""
    try:
        async for chunk in response.aiter_bytes():
            yield chunk
    except httpx2.TransportError as exc:
        raise TruncatedResponse(response, exc) from None
    except httpx2.DecodingError:
        raise MalformedResponse(response) from None


def stream_error(
    client: anthropic.Anthropic, response: httpx2.Response, body: object
) -> anthropic.APIStatusError:
    """An in-stream ``error`` event as the SDK's own stream raises it (an ``APIStatusError``
    with the response's status, usually 200, and the event's error type), so :func:`classify`
    sees it exactly as it sees the SDK's."""
    return client._make_status_error(  # the SDK Stream's own mapping
        f"{body}" if isinstance(body, Mapping) else str(body or ""), body=body, response=response
    )


def message_bytes(message: Mapping[str, Any]) -> bytes:
    """A message as JSON bytes: how an assembled (streamed) answer is recorded."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
