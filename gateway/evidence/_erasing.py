"""Retention, legal hold and erasure: the facade `gateway audit purge|erase|hold|release` use.

    with Erasing.open(settings) as erasing:
        report = erasing.purge(actor="ops-scheduler", dry_run=True)   # what retention allows
        erasing.erase(["req_..."], rule="subject_request", reason="DSAR 2026-118",
                      actor="j.smith", approver="dpo.k.lee")
        hold = erasing.hold(HoldScope(task="kyc"), reason="Case 12-cv-881", actor="legal")
        erasing.release(hold.hold_id, reason="case closed", actor="legal")

Each erasure is an ERASURE event per request (what, under which rule, by whom, approved by
whom), appended before its content is removed (audit.store.erasure), so a run killed at any
point is completed by running it again: nothing erased twice, nothing missed. Held content
and content under its regulatory minimum period are never erased (``ErasureRefused`` names
the hold or rule). What expires is read from the policy each request recorded, so a
request keeps the retention class it ran under.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from audit import AuditStore, StoredEvent
from audit.store.erasure import (
    Reference,
    erase_content,
    erasure_data,
    erasures_of,
    references,
)
from audit.store.models import Appended, EventDraft, EventKind
from audit.store.signing import signature_check
from audit.verify.authenticity import check_event
from gateway._inputs import check_name
from gateway._store_adapter import OwnsLog, StoreAdapter
from gateway.errors import ConfigurationError, ErasureRefused, InputError, IntegrityAlert
from gateway.evidence._erasure_plan import Decision, ErasurePlan, SummaryRow
from gateway.evidence._holds import (
    Hold,
    HoldScope,
    active_holds,
    holding,
    place_hold,
    release_hold,
)
from gateway.keys import cache_key_ring, record_signer, trusted_record_keys
from gateway.policy import Policy, minimum_days
from gateway.settings import Settings

__all__ = ["Erased", "Erasing", "ErasureReport", "PurgeReport", "PurgeRow"]

BATCH = 200  # erasure events appended in one transaction, then their content removed
# Format 2: seqs one append of the eraser may reserve. It may not INSERT content, so
# audit_reserve() (migration 0011) grants it a reader's 16 at a time.
SEQUENCED_BATCH = 16


class PurgeRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    task: str
    retention_class: str
    erased: int  # requests whose content is (or, dry run, would be) erased
    held: int  # expired, but under a legal hold
    under_minimum: int  # expired by the class, but a regulatory minimum has not run out
    reasons: tuple[str, ...] = ()


class PurgeReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    dry_run: bool
    requests_erased: int
    payloads_removed: int
    payloads_kept: int  # still named by a request that is not erased
    resumed_events: int  # erasures of an earlier, interrupted run completed now
    rows: tuple[PurgeRow, ...]


class ErasureReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    erased: dict[str, int]  # request id -> its erasure event's seq
    already: dict[str, int]  # erased before: request id -> that event's seq
    payloads_removed: int
    payloads_kept: int
    # A subject erasure: requests whose subject tags were made under cache keys the key ring
    # does not hold (key id -> requests), so they could not be searched.
    unsearched: dict[str, int] = {}


class Erased(BaseModel):
    """A request's content erased: by which event, when, under which rule; ``request_id``
    is the request whose content went (for a cache hit, the one it served)."""

    model_config = ConfigDict(frozen=True)

    request_id: str
    seq: int
    on: datetime
    rule: str
    reason: str
    actor: str
    approver: str | None

    def text(self) -> str:
        by = f", approved by {self.approver}" if self.approver else ""
        return (
            f"content of {self.request_id} erased on {self.on:%Y-%m-%d} by event seq "
            f"{self.seq} ({self.rule}: {self.reason}; by {self.actor}{by})"
        )


class _Retention:
    """Each recorded policy's retention class and regulatory minimum, read once."""

    def __init__(self, store: AuditStore) -> None:
        self._store = store
        self._seen: dict[str, tuple[int | None, str, int | None, str | None]] = {}

    def of(self, fingerprint: str | None) -> tuple[int | None, str, int | None, str | None]:
        """(content days, class label, minimum days, the rule that sets it)."""
        if fingerprint is None:
            return (None, "-", None, None)
        if fingerprint not in self._seen:
            content = self._store.policy_content(fingerprint)
            try:
                policy = Policy.from_content(content) if content is not None else None
            except ValueError:
                policy = None
            if policy is None:
                self._seen[fingerprint] = (None, "-", None, None)
            else:
                table = policy.retention
                label = table.name or (f"{table.content_days}d" if table.content_days else "keep")
                minimum = minimum_days(policy.regulations)
                self._seen[fingerprint] = (
                    table.content_days,
                    label,
                    minimum.days if minimum else None,
                    minimum.rule if minimum else None,
                )
        return self._seen[fingerprint]


class Erasing(OwnsLog):
    def __init__(self, log: StoreAdapter, settings: Settings) -> None:
        self._log = log
        self._store = log.store
        self._settings = settings

    @classmethod
    def open(cls, settings: Settings) -> Erasing:
        log = StoreAdapter.open(settings, signer=record_signer(settings, create=True))
        return cls(log, settings)

    # -- holds ------------------------------------------------------------------------------

    def _check(self) -> Any:
        store = self._store
        return signature_check(trusted_record_keys(self._settings, store.signer), store.store_id)

    def holds(self) -> list[Hold]:
        return self._log.run(active_holds, self._check())

    def hold(self, scope: HoldScope, *, reason: str, actor: str) -> Hold:
        _required(reason, "--reason")
        return self._log.run(place_hold, scope, reason=reason, actor=actor)

    def release(self, hold_id: str, *, reason: str, actor: str) -> int:
        _required(reason, "--reason")
        return self._log.run(release_hold, hold_id, reason=reason, actor=actor)

    # -- data subjects ----------------------------------------------------------------------

    def subject_tag(self, subject: str) -> str:
        """The keyed digest of ``subject`` under the current cache key (new requests')."""
        return self.subject_tags(subject)[0]

    def subject_tags(self, subject: str) -> list[str]:
        """The keyed digests the requests about ``subject`` recorded (gateway.keys.subject_tag)
        under each cache key of the ring, the current key's first: what a hold's scope and an
        erasure look for; the identifier itself is never written."""
        name = check_name(subject, "subject", example="customer-118204")
        ring = cache_key_ring(self._settings)
        if name is None or ring is None:
            raise ConfigurationError(
                "subjects are recorded as digests keyed under the deployment's cache key, and "
                "it is not here.",
                hint="Run this where the gateway's cache key is (GATEWAY_CACHE_KEY_FILE).",
            )
        return list(ring.subject_tags(name).values())

    def subject_requests(self, subject: str) -> list[str]:
        """The ids of the recorded requests about ``subject``, in the log's order."""
        return self._subject_search(subject)[0]

    def _subject_search(self, subject: str) -> tuple[list[str], dict[str, int]]:
        tags = set(self.subject_tags(subject))
        ring = cache_key_ring(self._settings)
        known = set(ring.key_ids) if ring is not None else set()
        return self._log.run(_requests_about, tags, known)

    def erase_subject(
        self,
        subject: str,
        *,
        reason: str,
        actor: str,
        approver: str,
        now: datetime | None = None,
    ) -> ErasureReport:
        """A data-subject request: erase the content of every request recorded about
        ``subject`` (:meth:`erase` under rule ``subject_request``; refused as a whole when
        any is held or under a regulatory minimum)."""
        _required(reason, "--reason")
        _required(approver, "--approver")
        ids, unsearched = self._subject_search(subject)
        if not ids:
            raise InputError(
                "no recorded request carries that subject"
                + (f" ({_unsearched(unsearched)})." if unsearched else "."),
                hint="A request names its subject when it is made (subject=..., "
                "`gateway ask --subject`); requests made without one are found by id. Earlier "
                "cache keys go in GATEWAY_PREVIOUS_CACHE_KEYS_FILE.",
            )
        report = self.erase(
            ids, rule="subject_request", reason=reason, actor=actor, approver=approver, now=now
        )
        return report.model_copy(update={"unsearched": unsearched})

    # -- erasure ----------------------------------------------------------------------------

    def erasure_of(self, request_id: str) -> Erased | None:
        """Whether the content ``audit show --content`` would read for ``request_id`` was
        erased (its own, or for a cache hit the answer it served), authenticated first."""
        erasure = self._log.run(_erasure_of, request_id)
        if erasure is None:
            return None
        problems = self._log.run(check_event, erasure, self._check())
        if problems:
            raise IntegrityAlert(
                f"the erasure event at seq {erasure.seq} did not check out ({problems[0]}).",
                problems=tuple(problems),
                request_id=request_id,
            )
        data = erasure.data
        return Erased(
            request_id=erasure.request_id,
            seq=erasure.seq,
            on=erasure.recorded_at,
            rule=str(data.get("rule", "")),
            reason=str(data.get("reason", "")),
            actor=str(data.get("actor", "")),
            approver=data.get("approver") if isinstance(data.get("approver"), str) else None,
        )

    def purge(
        self, *, actor: str, dry_run: bool = False, now: datetime | None = None
    ) -> PurgeReport:
        """Erase the content whose retention class has run out and that no hold or
        regulatory minimum keeps; complete any erasure an earlier run left unfinished."""
        return self._log.run(self._purge, actor, dry_run, now or datetime.now(UTC))

    def _purge(self, store: AuditStore, actor: str, dry_run: bool, moment: datetime) -> PurgeReport:
        retention = _Retention(store)
        holds = active_holds(store, self._check())

        def decide(request: Reference) -> Decision | None:
            days, label, minimum, rule = retention.of(request.policy_fingerprint)
            if days is None or request.recorded_at + timedelta(days=days) > moment:
                return None
            hold = holding(holds, request)
            if hold is not None:
                return Decision("held", label, {"why": _held(hold)})
            if minimum is not None and request.recorded_at + timedelta(days=minimum) > moment:
                return Decision("minimum", label, {"why": f"{rule} has not run out"})
            detail = {
                "retention_class": label,
                "content_days": days,
                "policy_fingerprint": request.policy_fingerprint,
            }
            return Decision("erase", label, detail)

        plan = ErasurePlan.build(store, decide)
        try:
            return self._run(plan, "retention", "retention class expired", actor, None, dry_run)
        finally:
            plan.close()

    def erase(
        self,
        request_ids: Iterable[str],
        *,
        rule: str,
        reason: str,
        actor: str,
        approver: str,
        now: datetime | None = None,
    ) -> ErasureReport:
        """Erase the content of ``request_ids`` now (a data-subject request, or another
        rule), refused as a whole (:class:`ErasureRefused`) if any of them is held or still
        under a regulatory minimum period."""
        _required(reason, "--reason")
        _required(approver, "--approver")
        moment = now or datetime.now(UTC)
        return self._log.run(self._erase, set(request_ids), rule, reason, actor, approver, moment)

    def _erase(
        self,
        store: AuditStore,
        wanted: set[str],
        rule: str,
        reason: str,
        actor: str,
        approver: str,
        moment: datetime,
    ) -> ErasureReport:
        retention = _Retention(store)
        holds = active_holds(store, self._check())

        def decide(request: Reference) -> Decision | None:
            if request.request_id not in wanted:
                return None
            hold = holding(holds, request)
            if hold is not None:
                return Decision("held", rule, {"why": _held(hold)})
            _, _, minimum, why = retention.of(request.policy_fingerprint)
            if minimum is not None and request.recorded_at + timedelta(days=minimum) > moment:
                until = (request.recorded_at + timedelta(days=minimum)).date().isoformat()
                return Decision("minimum", rule, {"why": f"{why} keeps it until {until}"})
            return Decision("erase", rule, {})

        plan = ErasurePlan.build(store, decide)
        try:
            already = {r: s for r in wanted if (s := plan.already_erased(r)) is not None}
            found = {r for r, _ in plan.refusals()}
            refused = list(plan.refusals())
            if refused:
                request_id, why = refused[0]
                raise ErasureRefused(
                    f"the content of request {request_id} may not be erased: {why}. "
                    f"Nothing was erased ({len(refused)} of {len(wanted)} refused)."
                )
            to_erase = {p.request_id for b in plan.batches(BATCH) for p in b}
            unknown = wanted - to_erase - set(already) - found
            if unknown:
                raise InputError(
                    f"no recorded request {sorted(unknown)[0]!r}.",
                    hint="List request ids with `gateway audit list`.",
                )
            report = self._run(plan, rule, reason, actor, approver, dry_run=False)
        finally:
            plan.close()
        erased = self._erasure_seqs(to_erase)
        return ErasureReport(
            erased=erased,
            already=already,
            payloads_removed=report.payloads_removed,
            payloads_kept=report.payloads_kept,
        )

    def _erasure_seqs(self, request_ids: set[str]) -> dict[str, int]:
        return {r: e.seq for r, e in erasures_of(self._store, request_ids).items()}

    def _run(
        self,
        plan: ErasurePlan,
        rule: str,
        reason: str,
        actor: str,
        approver: str | None,
        dry_run: bool,
    ) -> PurgeReport:
        store = self._store
        removed = kept = erased = resumed = 0
        if not dry_run:
            for unfinished in plan.unfinished(store):
                resumed += len(unfinished)
                removed += erase_content(store, unfinished)
        for batch in plan.batches(BATCH):
            erased += len(batch)
            kept += sum(len(p.kept) for p in batch)
            if dry_run:
                removed += sum(len(p.erased) for p in batch)
                continue
            drafts = [
                EventDraft(
                    kind=EventKind.ERASURE,
                    request_id=p.request_id,
                    task=p.task,
                    data=erasure_data(
                        p.request_id,
                        p.erased,
                        kept=p.kept,
                        rule=rule,
                        reason=reason,
                        actor=actor,
                        approver=approver,
                        extra=p.detail,
                    ),
                )
                for p in batch
            ]
            appended = _append(store, drafts)
            removed += erase_content(
                store, [(a.seq, p.erased) for a, p in zip(appended, batch, strict=True)]
            )
        return PurgeReport(
            dry_run=dry_run,
            requests_erased=erased,
            payloads_removed=removed,
            payloads_kept=kept,
            resumed_events=resumed,
            rows=tuple(_row(r) for r in plan.summary.values()),
        )


def _append(store: AuditStore, drafts: list[EventDraft]) -> list[Appended]:
    """A batch's erasure events, committed before any of their content goes: in one
    transaction on format 1; on format 2 a reader's reservation at a time, so a run stopped
    between two leaves events whose content the next run removes (``ErasurePlan.unfinished``)."""
    if store.sequenced_from is None:
        return store.append_many(drafts)
    appended: list[Appended] = []
    for start in range(0, len(drafts), SEQUENCED_BATCH):
        appended += store.append_many(drafts[start : start + SEQUENCED_BATCH])
    return appended


def _erasure_of(store: AuditStore, request_id: str) -> StoredEvent | None:
    """The first erasure event of ``request_id``'s content, or for a cache hit of the
    answer it served; not authenticated here."""
    owners = {request_id}
    for event in store.events_for_request(request_id):
        served = event.data.get("served_seq")
        if event.kind is EventKind.CACHE_HIT and isinstance(served, int):
            owners.add(store.event(served).request_id)
    found = erasures_of(store, owners)
    return min(found.values(), key=lambda e: e.seq) if found else None


def _row(row: SummaryRow) -> PurgeRow:
    return PurgeRow(
        task=row.task,
        retention_class=row.label,
        erased=row.erase,
        held=row.held,
        under_minimum=row.minimum,
        reasons=tuple(row.reasons),
    )


def _held(hold: Hold) -> str:
    return f"legal hold {hold.hold_id} (seq {hold.seq}, {hold.scope.text()}: {hold.reason})"


def _required(value: str | None, flag: str) -> None:
    if value is None or not value.strip():
        raise InputError(f"{flag} is required and may not be blank.")


def _requests_about(
    store: AuditStore, tags: set[str], key_ids: set[str]
) -> tuple[list[str], dict[str, int]]:
    """The requests carrying one of ``tags``, and how many carry a tag made under a key not
    in ``key_ids`` (by key id): those the ring cannot search."""
    found: list[str] = []
    unsearched: dict[str, int] = {}
    for r in references(store):
        if r.kind != EventKind.REQUEST.value or r.subject is None:
            continue
        if r.subject in tags:
            found.append(r.request_id)
        elif r.subject_key is not None and r.subject_key not in key_ids:
            unsearched[r.subject_key] = unsearched.get(r.subject_key, 0) + 1
    return found, unsearched


def _unsearched(unsearched: dict[str, int]) -> str:
    keys = ", ".join(sorted(unsearched))
    return (
        f"{sum(unsearched.values())} request(s) carry subject tags made under cache key(s) "
        f"{keys}, which the key ring does not hold, and were not searched"
    )
