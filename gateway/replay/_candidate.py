"""``--policies DIR``: replay recorded requests under a candidate policy folder (a proposed
change, before it is approved), so model risk sees what the edit would do to real traffic.

    candidate = Candidate.load(Path("proposed"), catalog)        # InputError: nothing recorded
    candidate.versions()        # {"compliance_review": "9b7e...", "risk_report": None (no load)}
    migration = plan_candidate(candidate, catalog, recorded, messages, requested, target=None)

Each request is re-planned under the candidate folder's policy for its task, as the gateway
would plan it once the folder were deployed: the same model when the candidate still lets
it answer (its ``[model] choices``), else the candidate's pinned model, over the candidate's
transport. With ``--model`` too, the candidate policy is moved to that model as a migration
would move the recorded one. A task the folder lacks, or whose file does not load (an error
finding), is refused with the reason; the other tasks replay. Approvals and effective dates
are not applied: the folder is a proposal, and its review is what this report informs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from gateway.catalog import Catalog, ModelInfo
from gateway.errors import GatewayError, InputError, PolicyError, PolicyLoadError, UnknownTask
from gateway.policy import ModelTarget, Policy, PolicySet, plan_request, transported
from gateway.replay._migration import Migration, plan_migration


@dataclass(frozen=True)
class Candidate:
    folder: Path
    policies: PolicySet

    @classmethod
    def load(cls, folder: Path, catalog: Catalog, *, today: date | None = None) -> Candidate:
        """The folder reviewed as ``gateway policy review`` would; InputError when it is
        missing or holds no policy file (nothing is recorded then)."""
        try:
            policies = PolicySet.load(folder, catalog, today=today)
        except PolicyLoadError as exc:
            raise InputError(f"--policies: {exc.message}", hint=exc.hint) from None
        if not policies.tasks():
            raise InputError(
                f"--policies: the folder {str(folder)!r} holds no policy file (*.toml).",
                hint="Pass the folder of the proposed policies, laid out like policies/.",
            )
        return cls(folder, policies)

    def policy(self, task: str | None) -> Policy | str:
        """The candidate's policy for ``task``, or one line saying why it has none."""
        if task is None:
            return "the recorded request names no task."
        try:
            return self.policies.get(task)
        except UnknownTask:
            return f"the candidate folder {str(self.folder)!r} has no policy for task {task!r}."
        except PolicyLoadError as exc:
            return f"in the candidate folder: {exc.message}"

    def versions(self) -> dict[str, str | None]:
        """Each task's fingerprint in the folder (None: its file does not load)."""
        return {
            e.task: e.policy.fingerprint if e.policy is not None else None
            for e in self.policies.entries()
        }

    def findings(self, task: str) -> tuple[str, ...]:
        """The review's findings on the candidate's policy for ``task``."""
        entry = self.policies.entry(task)
        if entry is None:
            return ()
        return tuple(f.line() for f in entry.findings)  # a loaded policy's are warnings


def plan_candidate(
    candidate: Candidate,
    catalog: Catalog,
    *,
    task: str | None,
    recorded_model: str | None,
    messages: Any,
    requested: Mapping[str, Any],
    target: ModelTarget | None,
    caller: str | None = None,
    user_id: str | None = None,
    today: date | None = None,
    region_of: Callable[[str], str | None] | None = None,
) -> Migration:
    """The request re-planned under the candidate's policy for ``task`` (see the module);
    ``region_of``: a live run's configured regions (see :func:`reached_model`)."""
    policy = candidate.policy(task)
    if isinstance(policy, str):
        return Migration(None, None, (), refusal=policy)
    if target is not None:
        return plan_migration(
            policy, target, messages, requested, caller=caller, user_id=user_id, today=today
        )
    findings = candidate.findings(policy.task)
    reached = reached_model(policy, catalog, recorded_model, region_of)
    if isinstance(reached, str):
        return Migration(policy, None, findings, refusal=reached)
    try:
        plan = plan_request(
            policy, reached, messages, overrides=dict(requested), caller=caller, user_id=user_id
        )
    except PolicyLoadError as exc:
        refused = tuple(f.line() for f in exc.findings if hasattr(f, "line"))
        return Migration(policy, None, findings or refused, refusal=exc.message)
    except GatewayError as exc:  # an override or input the candidate refuses
        return Migration(policy, None, findings, refusal=str(exc))
    return Migration(policy, plan, findings, refusal=None, reached=reached)


def reached_model(
    policy: Policy,
    catalog: Catalog,
    recorded_model: str | None,
    region_of: Callable[[str], str | None] | None = None,
) -> ModelInfo | str:
    """The model a request goes to under the candidate ``policy`` (the recorded one while
    the candidate lets it answer, else its pinned one) over its transport, or why none.
    ``region_of``: where the gateway sends each provider's requests (a live run: the region
    the candidate mandates must be it, as in production); None when nothing is sent."""
    model_id = recorded_model if recorded_model in policy.model.allowed else policy.model.id
    info = catalog.get(model_id)
    if info is None:
        return f"model {model_id!r} is not in the model catalog."
    try:
        return transported(info, policy, region_of or (lambda _provider: policy.model.region))
    except PolicyError as exc:
        return f"{exc.message} Nothing was sent."
