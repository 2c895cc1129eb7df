"""What the request path's stages hand each other: a request that passed its policy
(:class:`Prepared`), or one it refused, to be recorded REJECTED (:class:`Refusal`).

    prepared = pipeline.prepare("compliance_review", prompt="...", caller="payments-svc")
    prepared.labels          # what every event of the call carries
    prepared.body            # the wire body (the plan's, with "stream": true when streamed)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway._recording import CallLabels
from gateway.catalog import ModelInfo
from gateway.errors import InputError, PolicyError
from gateway.policy import Plan, Policy

__all__ = ["Prepared", "Refusal"]


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
    task: object
    caller: object
    policy: Policy | None
    overrides: object
