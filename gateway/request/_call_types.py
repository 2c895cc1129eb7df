"""What one recorded call is made of: its labels, its intent (and whether that is committed),
how it ended (:data:`Sent`: :class:`Replied` or :class:`Failed`), its one terminal outcome
(:class:`Terminal`), and how any failure after the intent becomes a typed upstream error.

    call = CallLabels(request_id="req_...", task="compliance_review", caller="payments-svc",
                      policy_fingerprint=policy.fingerprint, request_hash="sha256:...")
    intended = Intended(Intent(EventKind.REQUEST, {...}))   # committed by the recorder
    match sent:
        case Replied(reply=reply): ...
        case Failed(error=error): ...
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from audit import EventDraft, EventKind
from audit.sealing import SALT_BYTES
from gateway.errors import ConfigurationError, GatewayError, UpstreamError, UpstreamRejected
from gateway.providers.base import Provider, ProviderReply, RequestNotHonoured
from gateway.providers.stream import MessageAssembler

__all__ = [
    "CallLabels",
    "Failed",
    "Intended",
    "Intent",
    "Replied",
    "Sent",
    "StreamOutcomes",
    "Terminal",
    "cancel_reason",
    "failed",
    "replied",
    "unannounced",
]


@dataclass(frozen=True)
class CallLabels:
    """What every event of one call carries. ``attempt_context`` is added to each
    ATTEMPT_FAILED event (a replay names the request it replays)."""

    request_id: str
    task: str | None
    caller: str | None
    policy_fingerprint: str | None
    request_hash: str | None
    attempt_context: Mapping[str, Any] = field(default_factory=dict)
    # The call's random salt, which seals each of its payloads (audit.sealing): its digests
    # confirm no guessed content once erased (docs/security.md, "What an erased request
    # still reveals"); the same bytes twice in one call are still one row.
    seal_salt: bytes = field(default_factory=lambda: secrets.token_bytes(SALT_BYTES), repr=False)

    def draft(
        self,
        kind: EventKind,
        data: Mapping[str, Any],
        *,
        payloads: Mapping[str, bytes] | None = None,
        policy_content: Mapping[str, Any] | None = None,
        policy_canonical: bytes | None = None,
    ) -> EventDraft:
        return EventDraft(
            kind=kind,
            request_id=self.request_id,
            task=self.task,
            caller=self.caller,
            policy_fingerprint=self.policy_fingerprint,
            request_hash=self.request_hash,
            data=dict(data),
            payloads=dict(payloads or {}),
            seal_salt=self.seal_salt,
            policy_content=dict(policy_content) if policy_content is not None else None,
            policy_canonical=policy_canonical,
        )


@dataclass(frozen=True)
class Intent:
    """The event committed before a call: its kind, data, payloads (the caller's content
    overrides), and the policy stored with it. The wire bytes are added by the recorder as
    the ``request_body`` payload."""

    kind: EventKind
    data: Mapping[str, Any]
    policy_content: Mapping[str, Any] | None = None
    policy_canonical: bytes | None = None  # the content's canonical bytes, when known
    payloads: Mapping[str, bytes] = field(default_factory=dict)


class Intended:
    """One call's intent, committed once with the exact bytes about to be sent, by the
    provider itself just before it sends (``on_wire``), so that the request is built once.
    ``wire`` and ``seq`` are set once it is committed; a call that ends before then sent
    nothing and has no outcome to record."""

    __slots__ = ("intent", "seq", "wire")

    def __init__(self, intent: Intent) -> None:
        self.intent = intent
        self.wire: bytes | None = None
        self.seq: int | None = None

    @property
    def committed(self) -> bool:
        return self.seq is not None


@dataclass(frozen=True)
class Replied:
    """A recorded call that got its answer."""

    wire: bytes
    intent_seq: int
    reply: ProviderReply


@dataclass(frozen=True)
class Failed:
    """A recorded call that ended in a typed error (``detail`` may quote the input: for the
    audit record only). ``cause`` is the exception behind ``error``."""

    wire: bytes
    intent_seq: int
    error: UpstreamError
    detail: str | None = None
    cause: BaseException | None = None

    def raise_error(self) -> NoReturn:
        """Raise the error, chained to its cause unless it is its own cause."""
        if self.cause is self.error:
            raise self.error
        raise self.error from self.cause


# How a recorded call ended, once its intent was committed.
Sent = Replied | Failed


class Terminal:
    """The one terminal outcome of a request: whoever claims it first records it.

    Thread-safe, because an asyncio caller may be cancelled while a worker thread is about
    to record the answer: one of the two claims, the other records nothing."""

    __slots__ = ("_claimed", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed = False

    def claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    @property
    def claimed(self) -> bool:
        return self._claimed


class StreamOutcomes(Protocol):
    """How a stream's terminal outcome is recorded (the pipeline's events; the recorder
    decides which one, and that there is exactly one).

    ``completed`` records the RESPONSE; ``failed`` records FAILED with what arrived and
    raises ``sent.error``; ``cancelled`` records CANCELLED with what arrived (``reason``:
    ``closed`` when the caller stopped reading, ``cancelled``, ``interrupted``). The ``a``
    methods are the same for asyncio; each records its outcome even if the awaiting task is
    cancelled meanwhile."""

    def completed(self, reply: ProviderReply) -> None: ...

    def failed(self, sent: Failed, partial: MessageAssembler) -> None: ...

    def cancelled(self, partial: MessageAssembler, reason: str) -> None: ...

    async def acompleted(self, reply: ProviderReply) -> None: ...

    async def afailed(self, sent: Failed, partial: MessageAssembler) -> None: ...

    async def acancelled(self, partial: MessageAssembler, reason: str) -> None: ...


def cancel_reason(exc: BaseException) -> str:
    """Why a call ended without an outcome of its own, in the CANCELLED record's words."""
    if isinstance(exc, GeneratorExit):
        return "closed"  # the caller stopped reading (break, an exception, close())
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return type(exc).__name__


def replied(
    provider: Provider, call: CallLabels, intended: Intended, reply: ProviderReply
) -> Replied:
    """The reply as the call's outcome; a reply to a request whose intent was never committed
    is refused (:func:`unannounced`)."""
    if intended.wire is None or intended.seq is None:
        raise unannounced(provider.name, call.request_id)
    return Replied(intended.wire, intended.seq, reply)


def unannounced(provider: str, request_id: str) -> ConfigurationError:
    """A provider answered without first handing the gateway the bytes it sent (``on_wire``):
    the request went out unrecorded (invariant 1), so its answer is not used. An explicit
    check, not an ``assert``: ``python -O`` would remove that, and the answer would be
    returned with no REQUEST before it."""
    error = ConfigurationError(
        f"the {provider} provider sent the request without handing its bytes to the gateway "
        "first (on_wire), so it was not recorded before it went out; its answer is not used.",
        hint="A provider must call on_wire with the exact body bytes before it sends "
        "(gateway.providers.base.Provider).",
    )
    error.request_id = request_id
    return error


def failed(provider: Provider, call: CallLabels, intended: Intended, exc: Exception) -> Failed:
    """Whatever went wrong after the intent, as a typed upstream error.

    A provider's error as itself; a body the provider could not honour as UpstreamRejected
    with its fixed summary (its message, which may quote the input, is kept as ``detail``);
    anything else (a bug) as UpstreamRejected naming only the exception type, never its text.

    A failure before the intent was committed sent nothing and has no outcome to record: its
    error is raised here (a gateway error as itself, anything else as that UpstreamRejected).
    """
    if intended.wire is None or intended.seq is None:
        error = exc if isinstance(exc, GatewayError) else failure_of(provider, exc)[0]
        error.request_id = call.request_id
        if error is exc:
            raise error
        raise error from exc
    error, detail = failure_of(provider, exc)
    return Failed(intended.wire, intended.seq, error, detail=detail, cause=exc)


def failure_of(provider: Provider, exc: Exception) -> tuple[UpstreamError, str | None]:
    detail = None
    if isinstance(exc, UpstreamError):
        error = exc
    elif isinstance(exc, RequestNotHonoured):
        detail = exc.message
        error = UpstreamRejected(
            exc.summary,
            error_type=exc.error_type,
            attempts=1,
            hint="The reason is in the request's FAILED event: gateway audit show ID.",
        )
    else:
        error = UpstreamRejected(
            f"the {provider.name} provider failed ({type(exc).__name__}).",
            error_type="provider_error",
            hint="Run with 'gateway --debug' to see the cause.",
        )
    return error, detail
