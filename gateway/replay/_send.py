"""Send a wire body again, to Claude or to the local model, for ``--live``.

    senders = Senders(anthropic=lambda: AnthropicProvider(api_key=key), local=LocalProvider())
    wire = senders.wire_bytes("anthropic", body)       # record this before sending
    sent = senders.send("anthropic", body, api_version="2023-06-01", on_attempt_failed=record)
    sent.response, sent.error

Provider failures come back as ``Sent.error`` (one line, no upstream free text), not
exceptions: a failed call is one row of the report. ``on_attempt_failed`` sees every failed
attempt; if it raises (the audit log cannot record it), nothing more is sent and the
exception propagates. The Anthropic provider is built on first use, so a run that only
touches local models needs no API key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from audit.canonical import canonical_bytes
from gateway.errors import InputError, UpstreamError
from gateway.providers.base import AttemptFailure
from gateway.providers.local import LocalProvider

if TYPE_CHECKING:
    from gateway.providers.anthropic import AnthropicProvider


OnAttemptFailed = Callable[[AttemptFailure], None]


def _ignore(_failure: AttemptFailure) -> None:
    return None


@dataclass(frozen=True)
class Sent:
    response: dict[str, Any] | None
    response_bytes: bytes
    request_bytes: bytes
    attempts: int
    error: str | None = None


class Senders:
    def __init__(
        self,
        *,
        anthropic: Callable[[], AnthropicProvider] | None = None,
        local: LocalProvider | None = None,
    ) -> None:
        self._anthropic_factory = anthropic
        self._anthropic: AnthropicProvider | None = None
        self._local = local

    def local(self) -> LocalProvider:
        if self._local is None:
            self._local = LocalProvider()
        return self._local

    def anthropic(self) -> AnthropicProvider:
        """The provider; raises ConfigurationError (from the factory) when it cannot be built."""
        if self._anthropic is None:
            if self._anthropic_factory is None:
                raise InputError(
                    "this replay needs to call Claude, but no Anthropic provider is configured.",
                    hint="Set ANTHROPIC_API_KEY.",
                )
            self._anthropic = self._anthropic_factory()
        return self._anthropic

    def wire_bytes(self, provider: str, body: Mapping[str, Any]) -> bytes:
        """The exact body bytes :meth:`send` puts on the wire (or hands the local model)."""
        if provider == "local":
            return canonical_bytes(dict(body))
        return self.anthropic().wire_bytes(body)

    def send(
        self,
        provider: str,
        body: Mapping[str, Any],
        *,
        api_version: str,
        on_attempt_failed: OnAttemptFailed = _ignore,
    ) -> Sent:
        if provider == "local":
            return self._send_local(body)
        failures: list[AttemptFailure] = []

        def seen(failure: AttemptFailure) -> None:
            on_attempt_failed(failure)  # first: if it cannot be recorded, stop here
            failures.append(failure)

        try:
            reply = self.anthropic().send(
                dict(body), api_version=api_version, on_attempt_failed=seen
            )
        except UpstreamError as exc:
            return Sent(None, b"", b"", attempts=exc.attempts or len(failures), error=str(exc))
        return Sent(reply.response, reply.response_bytes, reply.request_bytes, reply.attempts)

    def _send_local(self, body: Mapping[str, Any]) -> Sent:
        try:
            reply = self.local().complete(body)
        except InputError as exc:  # LocalRequestError: a body the local model cannot honour
            return Sent(None, b"", b"", attempts=1, error=str(exc))
        return Sent(reply.response, reply.raw, canonical_bytes(dict(body)), attempts=1)

    def close(self) -> None:
        if self._anthropic is not None:
            self._anthropic.close()
