"""The audit log as the gateway's callers see it: read, verify, export and checkpoint.

    with Auditing.open(settings) as auditing:
        for request in auditing.requests(EventFilter(task="compliance_review"), limit=20):
            print(request.request_id, request.status)
        report = auditing.verify(checkpoint=Path("head.json"))

The store is reached through :class:`gateway._store_adapter.StoreAdapter`, so every error
the audit store raises leaves as the gateway's (the table is there): a caller catches
``GatewayError`` and nothing else.

Approvals, content reads and content exports import their modules in the method: listing
(`gateway audit list`, the commonest command) needs none of them, and they bring record
signature checks and `cryptography` (bench/cli_start_bench.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Self, TextIO

from audit import (
    AuditStore,
    Checkpoint,
    EventFilter,
    EventKind,
    ExportSummary,
    RequestSummary,
    StoredEvent,
    VerifyReport,
    export_events,
    list_requests,
)
from audit.reports.export import ExportFormat
from audit.store.models import EventDraft
from audit.store.signing import (
    signature_check,
)
from gateway._inputs import check_name
from gateway._store_adapter import OwnsLog, StoreAdapter
from gateway._vocabulary import request_status
from gateway.catalog import Catalog
from gateway.errors import (
    ConfigurationError,
    InputError,
    IntegrityAlert,
)
from gateway.evidence._proving import Proving
from gateway.evidence._usage import GroupBy, UsageReport, covered, usage_report
from gateway.keys import record_signer, trusted_record_keys
from gateway.policy import contract_of
from gateway.settings import Settings

if TYPE_CHECKING:  # loading policies (jsonschema, the review rules) is the caller's import
    from audit.verify.authenticity import SignatureCheck
    from gateway.evidence._approvals import ApprovalStatus
    from gateway.evidence._audit_content import RecordedContent
    from gateway.policy import PolicySet

__all__ = [
    "Auditing",
    "Checkpoint",
    "EventFilter",
    "EventKind",
    "ExportFormat",
    "ExportSummary",
    "RequestSummary",
    "StoredEvent",
    "VerifyReport",
    "checkpoint_text",
]

APPROVER_KEY_HINT = (
    "Set GATEWAY_APPROVER_KEY to your own Ed25519 approver key, kept by you and never in "
    "the database; make one with `gateway keys new approver --out FILE`."
)


def checkpoint_text(head: Checkpoint) -> str:
    """The checkpoint file's text: what ``gateway audit checkpoint`` writes."""
    from audit.proofs import checkpoint as checkpoints  # the files: on the first proof

    return checkpoints.dumps(head)


class Auditing(Proving, OwnsLog):
    """An open audit log. Reads are plain; an export and a checkpoint are recorded as events."""

    def __init__(self, log: StoreAdapter, settings: Settings) -> None:
        self._log = log
        self._settings = settings

    @classmethod
    def open(cls, settings: Settings) -> Self:
        """Open an existing audit database: a SQLite file that is not there is
        :class:`AuditUnavailable` ("no audit database at PATH"), and nothing is created."""
        return cls(
            StoreAdapter.open(settings, signer=record_signer(settings, create=False)), settings
        )

    def _writing(self) -> StoreAdapter:
        """The store, able to sign: an export and a checkpoint record themselves."""
        if self._log.store.signer is None:
            signer = record_signer(self._settings, create=True)
            log = StoreAdapter.open(self._settings, signer=signer)
            self._log.close()
            self._log = log
        return self._log

    def requests(
        self,
        filters: EventFilter | None = None,
        *,
        limit: int | None = 50,
        catalog: Catalog | None = None,
    ) -> list[RequestSummary]:
        """The newest ``limit`` requests matching ``filters`` (all when None), oldest first,
        each with its estimated cost priced from ``catalog`` (the configured one by default;
        ``cost_usd`` None where unpriced, as :meth:`usage`) and its caller ``contract``."""
        catalog = catalog if catalog is not None else Catalog.load(self._settings.catalog_override)
        rows = self._log.run(list_requests, filters, status=request_status, limit=limit)
        return self._log.run(_covered, rows, catalog)

    def count_requests(self, filters: EventFilter | None = None) -> int:
        """How many requests :meth:`requests` would list without a limit (counted by the
        database)."""
        filters = filters or EventFilter()
        return self._log.run(AuditStore.count_requests, **filters.model_dump())

    def usage(
        self, by: GroupBy, filters: EventFilter | None = None, *, catalog: Catalog | None = None
    ) -> UsageReport:
        """Recorded token usage and its cost, grouped ``by`` caller, task or model.

        Streams the matching outcome events page by page (memory holds one row per group);
        prices come from ``catalog`` (the configured one by default), and usage of a model
        without a sourced price is counted as unpriced, never estimated."""
        if catalog is None:
            catalog = Catalog.load(self._settings.catalog_override)
        return self._log.run(_usage, catalog, by, filters)

    def contract(self, fingerprint: str | None) -> str | None:
        """The caller contract ("strict", "opened") of a recorded policy version, or None."""
        if not fingerprint:
            return None
        return contract_of(self._log.run(AuditStore.policy_content, fingerprint))

    def pending_integration(self, events: list[StoredEvent]) -> set[int]:
        """The seqs of ``events`` a format-2 log has not linked yet (audit show marks them)."""
        return self._log.run(AuditStore.pending_integration, [e.seq for e in events])

    def events(self, filters: EventFilter) -> list[StoredEvent]:
        """The events matching ``filters`` (its ``kind`` for one kind), in seq order: for a
        few kinds over a period (an evidence pack's erasures and holds), not a whole log."""
        return self._log.run(_events, filters)

    def request_events(self, request_id: str) -> list[StoredEvent]:
        """A request's whole life in seq order; an ``InputError`` when nothing is recorded."""
        events = self._log.run(AuditStore.events_for_request, request_id)
        if not events:
            raise InputError(
                f"no audit events for request {request_id!r}.",
                hint="List request ids with `gateway audit list`.",
            )
        return events

    def read_content(self, request_id: str, *, reviewer: str) -> RecordedContent:
        """The system prompt, messages and answer ``request_id`` recorded, for ``reviewer``.

        The events whose content is read are checked first, as the read path checks an
        answer before serving it (record signatures under the keys :meth:`verify` trusts by
        default). Every read is recorded as an ACCESS event naming the reviewer and what was
        read, before anything is returned; a record that does not check out is refused
        (:class:`IntegrityAlert`, one line per problem) and the refusal is recorded too.
        """
        from gateway.evidence._audit_content import PARTS, content_plan, recorded_content

        reviewer = check_name(reviewer, "reviewer", example="j.smith") or ""
        events = self.request_events(request_id)
        log = self._writing()
        check = self._signature_check()
        # Checked, and what it reads named, before any content is read: the ACCESS event is
        # committed first, and a PostgreSQL reviewer's database returns content only against
        # it (migration 0015).
        plan = log.run(content_plan, events, signature=check)
        if plan.nothing is not None:
            raise InputError(
                f"request {request_id!r} has no recorded content: {plan.nothing}.",
                hint="`gateway audit show REQUEST_ID` shows what was recorded.",
            )
        shown = plan.refused() is None
        data: dict[str, object] = {
            "reviewer": reviewer,
            "read_request_id": request_id,
            "read": list(PARTS),
            "seqs": list(plan.seqs),
            "shown": shown,
        }
        if shown:
            data["payloads"] = plan.to_read
        else:
            data["problems"] = plan.problems
        draft = EventDraft(
            kind=EventKind.ACCESS,
            request_id=f"access-{uuid.uuid4().hex}",
            task=events[0].task,
            caller=reviewer,
            data=data,
        )
        appended = log.run(AuditStore.append, draft)
        found = None
        if shown:
            with AuditStore.reading_under(appended.seq):
                found = log.run(recorded_content, events, signature=check, plan=plan)
        if found is None or found.content is None:
            problems = (found.problems if found else plan.problems) or [
                "the record did not check out"
            ]
            raise IntegrityAlert(
                f"the recorded content of request {request_id!r} was not shown: its record "
                f"did not check out ({problems[0]}).",
                problems=tuple(problems),
                request_id=request_id,
            )
        return found.content.model_copy(update={"access_seq": appended.seq})

    def approve(
        self, policies: PolicySet, task: str, *, approver: str, reviewed: str | None = None
    ) -> tuple[ApprovalStatus, bool]:
        """Sign ``task``'s current fingerprint (``reviewed``, if given; else refused, as a key
        not pinned for the approver is) and record it as an APPROVAL event with the policy;
        returns the task's approvals after it and whether this approval was recorded (one
        already in the log is not recorded twice)."""
        from gateway.evidence._approvals import (
            approval_draft,
            on_record,
            refuse_unsound,
            sign_approval,
            trusted_approvers,
        )

        key = self._settings.approver_key
        if key is None:
            raise ConfigurationError("no approver key is configured.", hint=APPROVER_KEY_HINT)
        fingerprint, content = policies.signed(task)
        approval = sign_approval(
            key.get_secret_value(), task=task, fingerprint=fingerprint, approver=approver
        )
        refuse_unsound(approval, trusted_approvers(self._settings), reviewed)  # nothing written
        recorded = not on_record(self._log, approval, self._signature_check())
        if recorded:
            self._writing().run(AuditStore.append, approval_draft(approval, content))
        return self.approvals(policies, [task])[task], recorded

    def approvals(
        self, policies: PolicySet, tasks: Iterable[str] | None = None
    ) -> dict[str, ApprovalStatus]:
        """Who has approved each loaded task's current fingerprint; approval events count
        only when written by a trusted gateway (record signatures, as :meth:`verify`)."""
        from gateway.evidence._approvals import approval_status, trusted_approvers

        pins = trusted_approvers(self._settings)
        check = self._signature_check()
        return approval_status(
            self._log.store, policies, tasks=tasks, trusted_approvers=pins, signature=check
        )

    def reads_of(self, request_id: str) -> list[StoredEvent]:
        """The ACCESS events that read ``request_id``'s content, oldest first: content reads
        of that request, and content exports whose selection held it."""
        from gateway.evidence._audit_content import selected_by_export

        life = self._log.run(AuditStore.events_for_request, request_id)
        return [
            e
            for e in self._log.each(AuditStore.iter_events, kind=EventKind.ACCESS)
            # A reviewer's content export records each request it reads too (0015), under
            # its own ACCESS event, which is listed once for the selection.
            if e.data.get("export_access_seq") is None
            and (e.data.get("read_request_id") == request_id or selected_by_export(e, life))
        ]

    def export(
        self,
        out: TextIO,
        fmt: ExportFormat = "jsonl",
        filters: EventFilter | None = None,
        *,
        reviewer: str | None = None,
        with_content: bool = False,
    ) -> ExportSummary:
        """Write the matching events (bodies exactly as hashed, record signatures, and in
        JSONL the signed EXPORT event at the end) to ``out``; recorded first as an EXPORT
        event naming ``reviewer``.

        ``with_content`` (JSONL) adds each REQUEST's system prompt, messages and answer under
        ``content``, each checked as :meth:`read_content` checks it (a record that does not
        check out is written as ``{"refused": [...]}``, never shown); the read is recorded
        first as an ACCESS event naming the reviewer and the selection."""
        from gateway.evidence._audit_content import PARTS
        from gateway.evidence._export_content import content_annotator

        log = self._writing()
        filters = filters or EventFilter()
        annotate = None
        if with_content:
            if fmt != "jsonl":
                raise InputError("--with-content writes JSONL: content has no CSV form.")
            reviewer = check_name(reviewer, "reviewer", example="j.smith")
            if not reviewer:
                raise InputError("a content export needs the reviewer's name: it is recorded.")
            check = self._signature_check()
            draft = EventDraft(
                kind=EventKind.ACCESS,
                request_id=f"access-{uuid.uuid4().hex}",
                caller=reviewer,
                data={
                    "reviewer": reviewer,
                    "read": list(PARTS),
                    "export": {"format": fmt, "filters": _filter_json(filters)},
                    "shown": True,
                },
            )
            export_access = log.run(AuditStore.append, draft)
            annotate = content_annotator(
                log.store, check, reviewer=reviewer, export_seq=export_access.seq
            )

        return log.run(
            export_events,
            out,
            fmt,
            filters,
            reviewer=reviewer,
            annotate=annotate,
            with_content=annotate is not None,
        )

    def _signature_check(self) -> SignatureCheck:
        """Record signatures under the keys :meth:`verify` trusts by default."""
        store = self._log.store
        return signature_check(trusted_record_keys(self._settings, store.signer), store.store_id)


def _covered(
    store: AuditStore, rows: list[RequestSummary], catalog: Catalog
) -> list[RequestSummary]:
    return covered(rows, catalog, store.policy_content)


def _usage(
    store: AuditStore, catalog: Catalog, by: GroupBy, filters: EventFilter | None
) -> UsageReport:
    return usage_report(
        store.iter_events, catalog, by=by, filters=filters, content=store.policy_content
    )


def _filter_json(filters: EventFilter) -> dict[str, object]:
    return filters.model_dump(mode="json", exclude_none=True)


def _events(store: AuditStore, filters: EventFilter) -> list[StoredEvent]:
    return list(store.iter_events(**filters.model_dump()))
