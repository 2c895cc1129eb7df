"""A recorded policy version as `gateway policy history` and `gateway audit show` print it.

    version_json(version)      # its dates, requests, approvals and the diff from the previous
    approvals_text(version)    # "a.smith (2026-11-02 09:14:00), ..." or "none"

Apart from the history command, so that `audit show` renders a version without importing the
policy field table.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.evidence import ApprovalRecord, PolicyVersion
    from gateway.policy import TaskDiff

__all__ = ["approvals_text", "version_json", "when"]


def when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment is not None else "-"


def _approval_json(a: ApprovalRecord) -> dict[str, Any]:
    return {"approver": a.approver, "seq": a.seq, "at": a.at.isoformat(), "key_id": a.key_id}


def _diff_json(diff: TaskDiff | None) -> dict[str, Any] | None:
    if diff is None:
        return None
    return {
        "from": diff.old_fingerprint,
        "changes": [
            {"key": c.key, "old": c.old, "new": c.new, "risk": c.risk} for c in diff.changes
        ],
        "text_diffs": [{"key": t.key, "diff": list(t.lines)} for t in diff.text_diffs],
    }


def version_json(v: PolicyVersion) -> dict[str, Any]:
    return {
        "task": v.task,
        "fingerprint": v.fingerprint,
        "first_seq": v.first_seq,
        "first_used": v.first_used.isoformat() if v.first_used else None,
        "last_used": v.last_used.isoformat() if v.last_used else None,
        "requests": v.requests,
        "approvals": [_approval_json(a) for a in v.approvals],
        "not_counted": list(v.not_counted),
        "stored": v.stored,
        "diff_from_previous": _diff_json(v.diff),
    }


def approvals_text(v: PolicyVersion) -> str:
    return ", ".join(f"{a.approver} ({when(a.at)})" for a in v.approvals) or "none"
