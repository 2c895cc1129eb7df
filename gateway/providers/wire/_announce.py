"""The exact bytes about to be sent, told to whoever records them before anything is sent.

    with sending(client.messages.with_streaming_response.create(...), on_wire) as raw:
        ...   # on_wire(body_bytes) ran, and returned, before the request was written

Installed on every SDK client the wire layer builds (:func:`announce_wire`,
:func:`aannounce_wire` are its httpx request hooks), whatever the transport: the hooks run on
the finished (and, where the transport signs, signed) request just before the HTTP transport
writes it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    ExitStack,
    asynccontextmanager,
    contextmanager,
)
from contextvars import ContextVar
from typing import Any, TypeVar

import anthropic
import httpx2

from gateway.errors import ConfigurationError
from gateway.providers.base import WireTarget

__all__ = [
    "NotSent",
    "OnWire",
    "aannounce_wire",
    "announce_wire",
    "asending",
    "calling",
    "sending",
    "target_announcers",
]

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

# May return an awaitable (the async client awaits it); told ``target=`` by a client whose
# transport names the model in the URL (target_announcers).
OnWire = Callable[..., object]
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


TargetOf = Callable[[httpx2.Request], WireTarget]


def _tell(on_wire: OnWire, request: httpx2.Request, target_of: TargetOf | None) -> object:
    content = _wire_of(request)
    try:
        if target_of is None:
            return on_wire(content)
        return on_wire(content, target=target_of(request))
    except Exception as exc:
        raise NotSent(exc) from exc


def _hooks(
    target_of: TargetOf | None,
) -> tuple[Callable[[httpx2.Request], None], Callable[[httpx2.Request], Any]]:
    def announce(request: httpx2.Request) -> None:
        on_wire = _ON_WIRE.get()
        if on_wire is not None:
            _tell(on_wire, request, target_of)

    async def aannounce(request: httpx2.Request) -> None:
        on_wire = _ON_WIRE.get()
        if on_wire is None:
            return
        outcome = _tell(on_wire, request, target_of)
        if inspect.isawaitable(outcome):
            try:
                await outcome
            except Exception as exc:
                raise NotSent(exc) from exc

    return announce, aannounce


# The first-party API's hooks: the body is the whole request (the model id is in it).
announce_wire, aannounce_wire = _hooks(None)


def target_announcers(
    region: str | None,
) -> tuple[Callable[[httpx2.Request], None], Callable[[httpx2.Request], Any]]:
    """The sync and async hooks for a transport that moves the model id (and the stream flag)
    out of the body into the URL: ``on_wire`` is told the bytes and the request's target
    (method, URL as sent, ``region``), so the record says where the body went. Headers are
    never part of it: the signature and the token stay off the record."""

    def target_of(request: httpx2.Request) -> WireTarget:
        return WireTarget(method=request.method, url=str(request.url), region=region)

    return _hooks(target_of)


class _Announcement:
    """``on_wire``, noting that it was called. A release that sends later than on entering
    its call (outside the hook's window), or past httpx's hooks, would otherwise send
    unrecorded: entering without the announcement is an error, and in the first case
    nothing has been sent yet."""

    __slots__ = ("made", "on_wire")

    def __init__(self, on_wire: OnWire) -> None:
        self.on_wire = on_wire
        self.made = False

    def __call__(self, content: bytes, **target: WireTarget) -> object:
        self.made = True
        return self.on_wire(content, **target)

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
