"""The record of a gateway start that refuses tasks for lack of approvals.

    short = withhold_unapproved(store, policies, required, pins, signature)
    record_refused_tasks(store, short, required)      # one UNAPPROVED_TASKS event, if any

Each refused request is a REJECTED event already; this one says, once per start, that the
gateway came up refusing those tasks, so an outage of one task is on the record from its
first minute, not only from its first caller.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from audit import AuditStore, EventDraft, EventKind
from gateway._store_adapter import StoreAdapter
from gateway.evidence._approvals import ApprovalStatus

__all__ = ["record_refused_tasks", "refused_tasks_draft"]


def refused_tasks_draft(short: Sequence[ApprovalStatus], required: int) -> EventDraft:
    """The UNAPPROVED_TASKS event naming each refused task, its version and its approvals."""
    tasks = [
        {
            "task": s.task,
            "fingerprint": s.fingerprint,
            "approvers": list(s.approvers),
            "approval_seqs": list(s.seqs),
            "not_counted": list(s.rejected),
        }
        for s in short
    ]
    return EventDraft(
        kind=EventKind.UNAPPROVED_TASKS,
        request_id=f"start-{uuid.uuid4().hex}",
        task=short[0].task if len(short) == 1 else None,
        policy_fingerprint=short[0].fingerprint if len(short) == 1 else None,
        data={"required": required, "pinned": short[0].pinned, "tasks": tasks},
    )


def record_refused_tasks(
    store: AuditStore, short: Sequence[ApprovalStatus], required: int
) -> int | None:
    """Append the UNAPPROVED_TASKS event of a start that refuses ``short`` and return its
    seq (None, and nothing recorded, when it refuses no task)."""
    if not short:
        return None
    return StoreAdapter(store).run(AuditStore.append, refused_tasks_draft(short, required)).seq
