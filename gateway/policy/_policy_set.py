"""Load a policy folder into reviewed policies and findings.

    policies = PolicySet.load(Path("policies"), Catalog.load())
    policy = policies.get("compliance_review")      # UnknownTask / PolicyLoadError otherwise
    policies.check_in_effect(policy)                # PolicyViolation before its effective_date

Every file is read and checked even when others fail, so a review lists every problem at once.
Only policies without error findings load (DESIGN invariant 5).

A running gateway may withhold a task that loads (:meth:`PolicySet.withhold`: its version
lacks the approvals required): ``get`` raises that refusal for it alone, and a withheld
routing table routes nothing (``routes`` is None, ``routes_refused`` says why).

A policy with an ``effective_date`` loads (so it can be reviewed and approved ahead of time)
but serves no request before that day. "Today" is the set's clock: the day it was loaded
with (``today=``, how tests and reviews pin a date), else the current UTC date, read at each
check so that a running gateway starts serving a policy on its effective date.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from gateway.catalog import Catalog
from gateway.errors import PolicyError, PolicyLoadError, PolicyViolation, UnknownTask
from gateway.policy._files import (
    read_output_schema,
    read_policy_file,
    read_system_prompt,
    read_tools,
)
from gateway.policy._findings import Finding, Severity, count, error
from gateway.policy._folder import ROUTES_FILE, ROUTES_TASK, policy_files
from gateway.policy._routes import RouteTable, load_routes
from gateway.policy._schema import Policy
from gateway.policy.rules import Subject, check


@dataclass(frozen=True)
class PolicyEntry:
    """One task's file: what was written (if parseable, with the files it names read as far
    as they could be), the loaded policy, its findings."""

    task: str
    file: str
    data: Policy | None
    policy: Policy | None
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> int:
        return count(self.findings, Severity.ERROR)

    @property
    def warnings(self) -> int:
        return count(self.findings, Severity.WARNING)


class PolicySet:
    def __init__(
        self,
        policy_dir: Path,
        entries: dict[str, PolicyEntry],
        *,
        today: date | None = None,
        routes: RouteTable | None = None,
        route_findings: tuple[Finding, ...] = (),
    ) -> None:
        self.policy_dir = policy_dir
        self._entries = entries
        self._today = today
        # The folder's routes.toml (gateway.policy._routes): None when it has none, or when
        # the table has an error finding (then no route answers).
        self.routes = routes
        self.route_findings = route_findings
        # Withheld tasks (see withhold): each refusal made fresh per request, since a
        # refusal carries the request id of its REJECTED record.
        self._withheld: dict[str, Callable[[], PolicyError]] = {}
        self.routes_refused: Callable[[], PolicyError] | None = None
        # The withheld routing table: what it would route is refused, naming its version.
        self.withheld_routes: RouteTable | None = None

    @classmethod
    def load(cls, policy_dir: Path, catalog: Catalog, *, today: date | None = None) -> PolicySet:
        if not policy_dir.is_dir():
            raise PolicyLoadError(
                f"the policy folder {str(policy_dir)!r} does not exist or is not a folder.",
                hint="Pass the folder that holds the policy .toml files "
                "(or set GATEWAY_POLICY_DIR).",
            )
        day = today or datetime.now(UTC).date()  # the same UTC day as effective dates
        entries = [_load_one(path, policy_dir, catalog, day) for path in policy_files(policy_dir)]
        loaded = {e.task: e for e in _flag_duplicates(entries)}
        served = {t: e.policy.model.allowed if e.policy else None for t, e in loaded.items()}
        routes, found = load_routes(policy_dir, catalog, served)
        return cls(policy_dir, loaded, today=today, routes=routes, route_findings=found)

    def today(self) -> date:
        """The day effective dates are checked against (see the module docstring)."""
        return self._today if self._today is not None else datetime.now(UTC).date()

    def in_effect(self, policy: Policy) -> bool:
        """Whether ``policy`` has taken effect: no ``effective_date``, or one not after today."""
        return policy.effective_date is None or policy.effective_date <= self.today()

    def check_in_effect(self, policy: Policy) -> None:
        """Refuse (:class:`PolicyViolation`, key ``effective_date``) a request under a policy
        that has not taken effect yet."""
        if self.in_effect(policy):
            return
        raise PolicyViolation(
            f"task {policy.task!r} takes effect on {policy.effective_date}: its policy "
            f"(effective_date) serves no request before that day (today is {self.today()}, "
            "UTC).",
            key="effective_date",
        )

    def get(self, task: str) -> Policy:
        # A task is a name: a list or a dict a caller passed is an unknown task, recorded so,
        # not a TypeError from the lookup.
        entry = self._entries.get(task) if isinstance(task, str) else None
        if entry is None and task == ROUTES_TASK and self.routes_refused is not None:
            raise self.routes_refused()  # a request the withheld table would have routed
        if entry is None:
            raise UnknownTask(task, self.tasks())
        if entry.policy is None:
            first = next(f for f in entry.findings if f.severity is Severity.ERROR)
            raise PolicyLoadError(
                f"the policy for task {task!r} does not load ({entry.errors} error(s)); "
                f"first: {first.key}: {first.message}",
                findings=entry.findings,
                hint=f"Run 'gateway policy review' on {str(self.policy_dir)!r} for every finding.",
            )
        refusal = self._withheld.get(task)
        if refusal is not None:
            raise refusal()
        return entry.policy

    def withhold(self, task: str, refusal: Callable[[], PolicyError]) -> None:
        """Refuse ``task`` (each request gets ``refusal()``) while the other tasks serve;
        :data:`ROUTES_TASK` withholds the routing table, so no route answers."""
        if task == ROUTES_TASK:
            self.withheld_routes = self.routes or self.withheld_routes
            self.routes, self.routes_refused = None, refusal
        else:
            self._withheld[task] = refusal

    def withheld(self) -> list[str]:
        """The withheld tasks, the routing table as :data:`ROUTES_TASK`."""
        return sorted(self._withheld) + ([ROUTES_TASK] if self.routes_refused else [])

    def entry(self, task: str) -> PolicyEntry | None:
        return self._entries.get(task)

    def tasks(self) -> list[str]:
        return sorted(self._entries)

    def policies(self) -> list[Policy]:
        return [e.policy for e in self.entries() if e.policy is not None]

    def entries(self) -> list[PolicyEntry]:
        return [self._entries[t] for t in self.tasks()]

    def approvable(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """What approvals sign: each loaded task's fingerprint and content, and the routing
        table's under :data:`ROUTES_TASK` when it loads."""
        signed = {p.task: (p.fingerprint, p.content()) for p in self.policies()}
        if self.routes is not None:
            signed[ROUTES_TASK] = (self.routes.fingerprint, self.routes.content())
        return signed

    def signed(self, task: str) -> tuple[str, dict[str, Any]]:
        """What an approval of ``task`` signs (see :meth:`approvable`); UnknownTask or
        PolicyLoadError when there is nothing to sign."""
        signed = self.approvable().get(task)
        if signed is not None:
            return signed
        if task != ROUTES_TASK:
            self.get(task)  # raises why: an unknown task, or one that does not load
        raise PolicyLoadError(
            f"the routing table ({ROUTES_FILE}) does not load, so there is nothing to approve.",
            hint=f"Run 'gateway policy review' on {str(self.policy_dir)!r} for its findings.",
        )

    @property
    def findings(self) -> tuple[Finding, ...]:
        found = tuple(f for e in self.entries() for f in e.findings) + self.route_findings
        if not self._entries:
            return (
                error(
                    "no-policies",
                    str(self.policy_dir),
                    "folder",
                    "The folder holds no policy files, so every task would be refused.",
                    "Add one <task>.toml file per task.",
                ),
            )
        return found


def _load_one(path: Path, policy_dir: Path, catalog: Catalog, today: date) -> PolicyEntry:
    name = path.name
    written, findings = read_policy_file(path, name)
    if written is None:
        return PolicyEntry(path.stem, name, None, None, tuple(findings))
    prompt, output, tools = written.prompt, written.output, written.tools
    if prompt.system_file is not None:
        text, found = read_system_prompt(policy_dir, prompt.system_file, name)
        prompt, findings = prompt.model_copy(update={"system": text}), findings + found
    if output.schema_file is not None:
        schema, found = read_output_schema(policy_dir, output.schema_file, name)
        output, findings = output.model_copy(update={"json_schema": schema}), findings + found
    if tools.file is not None:
        definitions, found = read_tools(policy_dir, tools.file, name)
        tools, findings = tools.model_copy(update={"definitions": definitions}), findings + found
    data = written.model_copy(
        update={
            "task": path.stem,
            "prompt": prompt,
            "output": output,
            "tools": tools,
            "source": str(path),
        }
    )
    findings += check(Subject(name, data, catalog.get(data.model.id), today))
    findings += _choice_findings(name, data, catalog, today, findings)
    policy = None
    if not any(f.severity is Severity.ERROR for f in findings):
        policy = data.model_copy(update={"tools": tools.with_choice_settled()})
    return PolicyEntry(path.stem, name, data, policy, tuple(findings))


def _choice_findings(
    name: str, data: Policy, catalog: Catalog, today: date, pinned: list[Finding]
) -> list[Finding]:
    """Each ``[model] choices`` entry reviewed as the pinned model is: the rules' findings
    for the policy on that model that the pinned model does not already have."""
    known = {(f.rule, f.key) for f in pinned}
    found: list[Finding] = []
    for i, choice in enumerate(data.model.choices or ()):
        for f in check(Subject(name, data.on_model(choice), catalog.get(choice), today)):
            if (f.rule, f.key) in known:
                continue
            key = f"model.choices[{i}]" if f.key == "model.id" else f.key
            message = f"With the caller's model choice {choice!r}: {f.message}"
            found.append(f.model_copy(update={"key": key, "message": message}))
    return found


def _flag_duplicates(entries: list[PolicyEntry]) -> list[PolicyEntry]:
    # Task names differing only in case are one task on case-insensitive file systems.
    groups: dict[str, list[PolicyEntry]] = defaultdict(list)
    for entry in entries:
        groups[entry.task.casefold()].append(entry)
    result = []
    for entry in entries:
        twins = [e.file for e in groups[entry.task.casefold()] if e is not entry]
        if twins:
            dup = error(
                "duplicate-task",
                entry.file,
                "task",
                f"Task {entry.task!r} is also defined by {', '.join(twins)}; which one applies "
                "would depend on the file system.",
                "Keep exactly one file per task name (names are compared ignoring case).",
            )
            entry = PolicyEntry(entry.task, entry.file, entry.data, None, (*entry.findings, dup))
        result.append(entry)
    return result
