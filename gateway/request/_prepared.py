"""What the request path's stages hand each other: the caller's arguments (:class:`Request`),
a request that passed its policy (:class:`Prepared`) or one it refused, to be recorded
REJECTED (:class:`Refusal`), and where a prepared request stands (:data:`Step`).

    request = Request("compliance_review", prompt="...", caller="payments-svc")
    prepared = pipeline.prepare(request)
    prepared.labels          # what every event of the call carries
    prepared.body            # the wire body (the plan's, with "stream": true when streamed)
    match step:
        case Hit(result=result): ...       # served from the log
        case Send(intended=intended): ...  # to be sent, its intent committed as it goes
        case Miss(): ...                   # a replay miss: look again under its lock
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.catalog import ModelInfo
from gateway.errors import InputError, PolicyError
from gateway.policy import Plan, Policy
from gateway.request._call_types import CallLabels, Intended
from gateway.result import Result

__all__ = ["Hit", "Miss", "Prepared", "Refusal", "Request", "Send", "Step"]


@dataclass(frozen=True)
class Request:
    """One request as its caller gave it, unchecked (the pipeline checks every part).
    ``counting``: planned for a token count, not a call (so no delivery mode applies)."""

    task: str
    prompt: object = None
    messages: object = None
    caller: object = None
    overrides: Mapping[str, object] | None = None
    stream: bool = False
    timeout: object = None
    counting: bool = False
    # The data subject the request is about (a DSAR's identifier), recorded only as a keyed
    # digest (gateway.keys.subject_tag) so that `gateway audit erase --subject` finds it.
    subject: object = None


@dataclass(frozen=True)
class Prepared:
    """A request that passed its policy: everything needed to call and to record."""

    request_id: str
    caller: str | None
    policy: Policy
    model: ModelInfo
    plan: Plan
    request_hash: str
    model_version: str | None
    stream: bool = False
    timeout_s: float | None = None
    # The unkeyed hash, when ``request_hash`` is keyed: answers recorded before keyed hashes
    # are found under it (never recorded for a new event).
    plain_hash: str | None = None
    subject_tag: str | None = None  # the recorded keyed digest of the request's subject
    subject_key: str | None = None  # the id of the cache key it is keyed under
    labels: CallLabels = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = CallLabels(
            request_id=self.request_id,
            task=self.plan.task,
            caller=self.caller,
            policy_fingerprint=self.policy.fingerprint,
            request_hash=self.request_hash,
        )
        object.__setattr__(self, "labels", labels)

    @property
    def body(self) -> dict[str, Any]:
        """The wire body: the plan's, with ``"stream": true`` for a streamed request."""
        return {**self.plan.body, "stream": True} if self.stream else self.plan.body


@dataclass(frozen=True)
class Refusal:
    """A request its policy or its input refused (the error names the request id), to be
    recorded REJECTED by :meth:`RequestPipeline.refuse`."""

    error: PolicyError | InputError
    request: Request
    policy: Policy | None
    overrides: object  # as the caller gave them (recorded as requested)


@dataclass(frozen=True)
class Hit:
    """Served from the log: its Result and the recorded message (a stream streams it)."""

    prepared: Prepared
    result: Result
    message: Mapping[str, Any]


@dataclass(frozen=True)
class Send:
    """To be sent: its intent is committed by the provider just before it sends."""

    prepared: Prepared
    intended: Intended


@dataclass(frozen=True)
class Miss:
    """A replay miss: looked up again under the request's lock, so that concurrent
    identical misses make one upstream call and the rest are served from it."""

    prepared: Prepared


Step = Hit | Send | Miss
