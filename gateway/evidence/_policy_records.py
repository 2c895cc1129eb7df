"""Policy versions as records: each version of a task the log holds, when it was in use, who
approved it and when, and what changed from the version before.

    with PolicyRecords.open(settings) as records:            # an Auditing, reading versions
        for version in records.history("compliance_review"):
            version.fingerprint, version.first_used, [a.approver for a in version.approvals]
        policy = records.policy("sha256:4f2a...")       # the stored version, rebuilt

A version's content is the one the log stored with its first event (``policy_versions``);
its dates are those of the requests recorded under it (a derived policy's requests, an
experiment's, are not the task's versions and are left out). An approval is listed only if
it counts as :func:`~gateway.evidence.approval_status` counts it: its signature checks out,
its key is the one pinned for its approver, its event was written by a trusted gateway;
the others are listed apart, with the reason, never as approvals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from audit import AuditStore, EventKind, StoredEvent
from audit.store.signing import signature_check
from audit.verify.authenticity import SignatureCheck
from gateway.errors import GatewayError, InputError
from gateway.evidence._approvals import _why_not, trusted_approvers
from gateway.evidence._auditing import Auditing
from gateway.keys import trusted_record_keys
from gateway.policy import Policy, TaskDiff, diff_policies

__all__ = ["ApprovalRecord", "PolicyRecords", "PolicyVersion", "SignoffHistory"]

# The events that put a policy version to use: a request sent, served from the log, refused
# or counted under it.
USES = frozenset(
    {EventKind.REQUEST, EventKind.CACHE_HIT, EventKind.REJECTED, EventKind.TOKEN_COUNT}
)


@dataclass(frozen=True)
class ApprovalRecord:
    approver: str
    seq: int
    at: datetime
    key_id: str


@dataclass(frozen=True)
class PolicyVersion:
    """One version of a task's policy, as the log records it."""

    task: str
    fingerprint: str
    first_seq: int  # the first event naming it (a use or an approval)
    first_used: datetime | None = None  # None: approved, never used
    last_used: datetime | None = None
    requests: int = 0
    approvals: tuple[ApprovalRecord, ...] = ()
    not_counted: tuple[str, ...] = ()  # approvals that do not count, each with the reason
    stored: bool = False  # whether the log holds its content (policy show --fingerprint)
    diff: TaskDiff | None = None  # from the version before it (None for the first)

    @property
    def approved_at(self) -> datetime | None:
        """When its last counted approval was recorded."""
        return self.approvals[-1].at if self.approvals else None


@dataclass(frozen=True)
class SignoffHistory:
    """What a sign-off sheet tells from the log: when each approval of the version under
    review was recorded, and the last earlier version that had its approvals, with what
    changed since (None: no earlier version of the task was approved)."""

    approved_at: Mapping[int, datetime]  # APPROVAL seq -> when it was recorded
    last_approved: PolicyVersion | None = None
    changes: TaskDiff | None = None


@dataclass
class _Acc:
    first_seq: int
    first_used: datetime | None = None
    last_used: datetime | None = None
    request_ids: set[str] = field(default_factory=set)
    approvals: list[ApprovalRecord] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    not_counted: list[str] = field(default_factory=list)

    def use(self, event: StoredEvent) -> None:
        if event.request_id not in self.request_ids:
            self.request_ids.add(event.request_id)
            self.first_used = self.first_used or event.recorded_at
            self.last_used = event.recorded_at


class PolicyRecords(Auditing):
    """The policy versions an audit log holds (reads only); opened as :class:`Auditing`."""

    @cached_property
    def _pins(self) -> dict[str, str] | None:
        return trusted_approvers(self._settings)

    @cached_property
    def _check(self) -> SignatureCheck:
        store = self._log.store
        return signature_check(trusted_record_keys(self._settings, store.signer), store.store_id)

    def history(self, task: str) -> list[PolicyVersion]:
        """Each version of ``task`` the log names, in the order it first appeared, with the
        diff from the one before; an :class:`InputError` when the log names none."""
        accs: dict[str, _Acc] = {}
        for event in self._log.each(AuditStore.iter_events, task=task):
            fingerprint = event.policy_fingerprint
            if fingerprint is None or _derived(event):
                continue
            if event.kind in USES:
                accs.setdefault(fingerprint, _Acc(first_seq=event.seq)).use(event)
            elif event.kind == EventKind.APPROVAL:
                acc = accs.setdefault(fingerprint, _Acc(first_seq=event.seq))
                self._approval(acc, event, task, fingerprint)
        contents = {fp: self._log.run(AuditStore.policy_content, fp) for fp in accs}
        if not accs:
            raise InputError(
                f"the audit log names no version of task {task!r}.",
                hint="List the tasks it holds with `gateway audit usage --by task`.",
            )
        versions: list[PolicyVersion] = []
        previous: Policy | None = None
        for fingerprint, acc in accs.items():
            policy = _rebuilt(contents[fingerprint])
            diff = diff_policies(previous, policy) if previous and policy else None
            versions.append(
                PolicyVersion(
                    task,
                    fingerprint,
                    acc.first_seq,
                    acc.first_used,
                    acc.last_used,
                    len(acc.request_ids),
                    tuple(acc.approvals),
                    tuple(acc.not_counted),
                    contents[fingerprint] is not None,
                    diff,
                )
            )
            previous = policy or previous
        return versions

    def version(self, task: str, fingerprint: str) -> PolicyVersion | None:
        """One version of ``task`` (as :meth:`history` gives it), None if the log has none."""
        try:
            versions = self.history(task)
        except InputError:
            return None
        found = next((v for v in versions if v.fingerprint == fingerprint), None)
        return replace(found, diff=None) if found is not None else None

    def content(self, fingerprint: str) -> dict[str, Any]:
        """The stored content of the version ``fingerprint`` (the whole ``sha256:...``); an
        :class:`InputError` when the log has none."""
        content = self._log.run(AuditStore.policy_content, fingerprint)
        if content is None:
            raise InputError(
                f"the audit log stores no policy version {fingerprint}.",
                hint="See a task's versions with `gateway policy history TASK` (whole "
                "fingerprints with --format json).",
            )
        return content

    def policy(self, fingerprint: str) -> Policy:
        """The stored version ``fingerprint``, rebuilt as the Policy that was recorded."""
        policy = _rebuilt(self.content(fingerprint))
        if policy is None:
            raise InputError(
                f"the stored version {fingerprint} is not a task's policy (a routing table?).",
                hint="Print it whole with --format json.",
            )
        return policy

    def signoff(self, policy: Policy, required: int) -> SignoffHistory:
        """The approval dates of ``policy``'s version and the changes since the last other
        version with ``required`` approvals (at least one) by the log's counting."""
        try:
            versions = self.history(policy.task)
        except InputError:
            return SignoffHistory({})
        dates = {
            a.seq: a.at
            for v in versions
            if v.fingerprint == policy.fingerprint
            for a in v.approvals
        }
        approved = [
            v
            for v in versions
            if v.fingerprint != policy.fingerprint and len(v.approvals) >= max(required, 1)
        ]
        if not approved:
            return SignoffHistory(dates)
        last = max(approved, key=lambda v: v.approvals[-1].seq)
        before = _rebuilt(self._log.run(AuditStore.policy_content, last.fingerprint))
        changes = diff_policies(before, policy) if before is not None else None
        return SignoffHistory(dates, replace(last, diff=None), changes)

    def _approval(self, acc: _Acc, event: StoredEvent, task: str, fingerprint: str) -> None:
        reason = _why_not(event, task, fingerprint, self._pins, self._check, self._log)
        if reason is not None:
            acc.not_counted.append(reason)
            return
        approver, key = event.data["approver"], event.data["public_key"]
        if approver in {a.approver for a in acc.approvals} or key in acc.keys:
            return  # one approver (or one key) counts once, as approval_status counts
        acc.keys.add(key)
        key_id = event.data.get("key_id")
        acc.approvals.append(
            ApprovalRecord(approver, event.seq, event.recorded_at, str(key_id or ""))
        )


def _derived(event: StoredEvent) -> bool:
    return isinstance(event.data.get("derived"), Mapping)


def _rebuilt(content: dict[str, Any] | None) -> Policy | None:
    if content is None:
        return None
    try:
        return Policy.from_content(content)
    except (GatewayError, ValueError):  # a routing table's content, or a shape since retired
        return None
