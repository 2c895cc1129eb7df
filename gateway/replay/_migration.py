"""``--model TARGET``: re-plan a recorded request under its recorded policy with the model (and,
for a transport-qualified target, the transport and region) swapped.

    migration = plan_migration(recorded, parse_model_target(text, catalog), messages, requested)
    migration.findings        # what the review rules say about the policy on the new model
    migration.plan            # None when the new model would refuse the policy or the request
    migration.refusal         # one line: why

The review rules are the same ones that stop a policy loading (DESIGN.md invariant 5), so the
report says, in the reviewer's words, what the new model cannot honour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from gateway.catalog import ModelInfo
from gateway.errors import GatewayError, PolicyLoadError
from gateway.policy import ModelTarget, Plan, Policy, plan_request
from gateway.policy.rules import Subject, check


@dataclass(frozen=True)
class Migration:
    # The policy replayed: the recorded (or candidate) one pinned to the target, with its own
    # fingerprint; None when a candidate folder has none for the task.
    policy: Policy | None
    plan: Plan | None
    findings: tuple[str, ...]
    refusal: str | None
    reached: ModelInfo | None = None  # with a plan: the model on the transport it goes over


def plan_migration(
    policy: Policy,
    target: ModelTarget,
    messages: Any,
    requested: Mapping[str, Any],
    *,
    caller: str | None = None,
    user_id: str | None = None,
    today: date | None = None,
) -> Migration:
    """``user_id``: the recorded ``metadata.user_id``, kept when the policy forwards one."""
    moved = target.policy(policy)
    day = today or date.today()
    findings = tuple(f.line() for f in check(Subject.of_policy(moved, target.model, today=day)))
    try:
        plan = plan_request(
            moved,
            target.reached,
            messages,
            overrides=dict(requested),
            caller=caller,
            user_id=user_id,
        )
    except PolicyLoadError as exc:
        refused = tuple(f.line() for f in exc.findings if hasattr(f, "line"))
        return Migration(moved, None, findings or refused, refusal=exc.message)
    except GatewayError as exc:  # an override or input the new model's limits refuse
        return Migration(moved, None, findings, refusal=str(exc))
    return Migration(moved, plan, findings, refusal=None, reached=target.reached)
