"""What a pack measures of the log for a period: counts, models, policy versions, integrity.

    facts = gather(auditing, since, until, verify_report, export_report)

Every regime's items are judged from these one set of facts (gateway.packs._regimes), so two
packs of the same period never disagree on a count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from audit import EventFilter
from gateway.evidence import Auditing, ExportVerifyReport, VerifyReport

# Statuses of a model call (gateway._vocabulary's names), as against a reader's own acts.
CALLS = ("completed", "flagged", "failed", "rejected", "cancelled", "cache hit", "incomplete")


@dataclass
class Facts:
    since: datetime
    until: datetime
    statuses: Counter[str]
    models: dict[str, dict[str, Any]]  # model id -> calls, tasks, first, last
    versions: dict[str, dict[str, Any]]  # task -> fingerprint -> calls, first, last
    verify: VerifyReport
    export: ExportVerifyReport
    time_regressions: int
    first_at: datetime | None
    last_at: datetime | None
    files: dict[str, str] = field(default_factory=dict)  # pack file -> what it is

    @property
    def calls(self) -> int:
        return sum(self.statuses[s] for s in CALLS)


def gather(
    auditing: Auditing,
    since: datetime,
    until: datetime,
    verify: VerifyReport,
    export: ExportVerifyReport,
) -> Facts:
    rows = auditing.requests(EventFilter(since=since, until=until), limit=None)
    statuses: Counter[str] = Counter(r.status for r in rows)
    models: dict[str, dict[str, Any]] = {}
    versions: dict[str, dict[str, Any]] = {}
    regressions = 0
    previous: datetime | None = None
    for row in sorted(rows, key=lambda r: r.first_seq):
        if previous is not None and row.started_at < previous:
            regressions += 1  # a later seq stamped earlier: the clock stepped back
        previous = row.started_at
        if row.status not in CALLS:
            continue
        if row.model:
            seen = models.setdefault(
                row.model, {"calls": 0, "tasks": set(), "first": row.started_at}
            )
            seen["calls"] += 1
            seen["tasks"].add(row.task or "-")
            seen["last"] = row.started_at
        if row.task and row.policy_fingerprint:
            task = versions.setdefault(row.task, {})
            version = task.setdefault(row.policy_fingerprint, {"calls": 0, "first": row.started_at})
            version["calls"] += 1
            version["last"] = row.started_at
    return Facts(
        since=since,
        until=until,
        statuses=statuses,
        models=models,
        versions=versions,
        verify=verify,
        export=export,
        time_regressions=regressions,
        first_at=min((r.started_at for r in rows), default=None),
        last_at=max((r.started_at for r in rows), default=None),
    )
