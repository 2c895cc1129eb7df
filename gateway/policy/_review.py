"""The compliance review of a policy folder.

report = review_policies(Path("policies"), Catalog.load())
report.ok          # False when any finding is an error
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from gateway.catalog import Catalog
from gateway.policy._findings import Finding, Severity, count
from gateway.policy._policy_set import PolicyEntry, PolicySet
from gateway.policy._schema import Policy


@dataclass(frozen=True)
class ReviewReport:
    policy_dir: Path
    entries: tuple[PolicyEntry, ...]
    findings: tuple[Finding, ...]

    @property
    def policies(self) -> tuple[Policy, ...]:
        """The policies that load (no error findings)."""
        return tuple(e.policy for e in self.entries if e.policy is not None)

    @property
    def errors(self) -> int:
        return count(self.findings, Severity.ERROR)

    @property
    def warnings(self) -> int:
        return count(self.findings, Severity.WARNING)

    @property
    def ok(self) -> bool:
        return self.errors == 0


def review_policies(
    policy_dir: Path, catalog: Catalog, *, today: date | None = None
) -> ReviewReport:
    policies = PolicySet.load(policy_dir, catalog, today=today)
    return ReviewReport(policy_dir, tuple(policies.entries()), policies.findings)
