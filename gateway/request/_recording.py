"""The one recorder of a call's events, used by Gateway, AsyncGateway and live replay alike.

    recorder = Recorder(store)
    call = CallLabels(request_id="req_...", task="compliance_review", caller="payments-svc",
                      policy_fingerprint=policy.fingerprint, request_hash="sha256:...")
    sent = recorder.send(call, provider, body, api_version="2023-06-01",
                         intent=Intent(EventKind.REQUEST, {...}, policy.content()))
    match sent: ...                      # Replied or Failed: the outcome is the caller's to record

``send`` is ``call`` on a fresh :class:`Intended`: the provider builds the request once and,
just before it sends, hands the exact body bytes to the recorder (``on_wire``), which commits
the intent with them; then each failed attempt is recorded. ``acall`` is the asyncio twin
(each record drafted on the loop and committed by the store's committing thread while the
loop goes on: :meth:`Recorder.aappend`). A streamed answer is recorded by _recorded_streams
over the same commits; what a call is made of is in _call_types.

A call is: an intent event with the exact wire bytes, committed before anything is sent
(invariant 1; a call that fails before then sent nothing and records no outcome); one
ATTEMPT_FAILED event per failed attempt, committed before any retry; then a reply, or a
typed :class:`UpstreamError` for whatever went wrong after the intent. Every append goes
through :meth:`Recorder.append` or :meth:`Recorder.aappend`, where an audit-store error
becomes the gateway's :class:`AuditWriteError` (reads go through ``reads``, a StoreAdapter);
when an intent or an attempt cannot be recorded the call stops there (fail closed) and that
error propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select

from audit import Appended, AuditStore, EventDraft, EventKind
from audit.errors import AuditStoreError, ContentConflict
from audit.store.schema import EVENTS
from audit.store.signing import Signer, signature_check
from audit.verify.authenticity import SignatureCheck
from audit.verify.eras import KeyEras
from gateway._attachment_payloads import stored_payloads
from gateway._store_adapter import StoreAdapter, require_database
from gateway.errors import AuditError, AuditWriteError, ConfigurationError
from gateway.keys import (
    KEYED_PREFIX,
    CacheKey,
    cache_key,
    record_signer,
    trusted_record_keys,
)
from gateway.providers.base import AsyncOnWire, AttemptFailure, OnWire, Provider, WireTarget
from gateway.request._call_types import CallLabels, Intended, Intent, Sent, failed, replied
from gateway.request._record_facts import quoted_text
from gateway.request._threads import AuditThreads, Job
from gateway.settings import Settings

__all__ = ["INLINE_WIRE_BYTES", "Recorder"]

# A request body up to this size is drafted and digested on the event loop before its intent
# is committed (well under a millisecond); a larger one in a worker thread.
INLINE_WIRE_BYTES = 256 * 1024


class Recorder:
    """``signature`` checks a recorded event's signature under the trusted keys (None: no
    keys configured, so the read path checks everything but authorship). ``threads`` run
    the asyncio methods' audit writes (started on first use; closed by the recorder's owner)."""

    def __init__(
        self,
        store: AuditStore,
        *,
        signature: SignatureCheck | None = None,
        threads: AuditThreads | None = None,
        cache_key: CacheKey | None = None,
    ) -> None:
        self.store = store
        # The deployment's secret the replay key is an HMAC under (gateway.keys.cache_key).
        self.cache_key = cache_key
        self.reads = StoreAdapter(store)  # reads outside a call: the gateway's errors
        self.signature = signature
        self.threads = threads if threads is not None else AuditThreads()

    @classmethod
    def open(cls, settings: Settings, *, create: bool = True) -> Recorder:
        """A recorder on the audit store ``settings`` names (created and migrated if new;
        with ``create=False`` a missing SQLite file is :class:`AuditUnavailable`).

        Every event it appends is signed with the record key (``record_signer``), and the
        read path trusts that key and the configured trusted keys, nothing else. With
        ``settings.audit_format`` 2 the store begins format 2 if the log has not
        (docs/audit.md, log format 2).
        """
        if not create:
            require_database(settings)  # before the record key: a refusal creates nothing
        signer = record_signer(settings, create=True)
        trusted = trusted_record_keys(settings, signer)
        reads = StoreAdapter.open(
            settings,
            signer=signer,
            create=create,
            log_format=settings.audit_format,  # 2 begins format 2 (once) on PostgreSQL
        )
        check = signature_check(trusted, reads.store.store_id)
        if signer is not None:
            _refuse_retired_signer(reads, signer, check)
        key = cache_key(settings, create=True, keyed_log=lambda: reads.run(_holds_keyed_hashes))
        return cls(reads.store, signature=check, cache_key=key)

    # -- the one translation of audit-store errors --------------------------------------------

    def append(self, draft: EventDraft) -> Appended:
        try:
            return self.store.append(draft)
        except AuditStoreError as exc:
            if isinstance(exc, ContentConflict):
                self._alert_content_conflict(draft, exc)
            raise _write_error(draft, exc) from exc

    async def aappend(
        self, draft: EventDraft, *, then: Callable[[Appended], object] | None = None
    ) -> Appended:
        """:meth:`append` for asyncio, with no thread waiting for the commit: ``draft`` is
        prepared on the loop and joins the store's next group commit; the loop is told when
        it is durable (``AuditStore.append_soon``). ``then``: what must follow the committed
        event, called on the loop with it (a cache offer, a log line).

        Cancelled meanwhile, it re-raises the cancellation at once: the append cannot be
        taken back and is committed all the same, and ``then`` (or a content conflict's
        alert) follows it when it ends, with nobody waiting (a call's outcome: its caller
        may be gone, as a server's request time-out cancels it)."""
        job = self._append_soon(draft)
        try:
            appended = await job
        except asyncio.CancelledError:
            job.when_settled(lambda: self._followed(draft, job, then))
            raise
        except AuditStoreError as exc:
            raise await self._refused(draft, exc) from exc
        if then is not None:
            then(appended)
        return appended

    async def _awaited(self, draft: EventDraft, job: Job[Appended]) -> Appended:
        """``job``'s outcome; cancelled meanwhile, it still waits for it (the caller needs to
        know whether ``draft`` was committed), then re-raises the cancellation."""
        try:
            return await job
        except asyncio.CancelledError:
            await job.settled()
            self._followed(draft, job, None)
            raise
        except AuditStoreError as exc:
            raise await self._refused(draft, exc) from exc

    def _followed(
        self, draft: EventDraft, job: Job[Appended], then: Callable[[Appended], object] | None
    ) -> None:
        """After a settled append that nobody waited for: ``then``, or the alert of a content
        conflict (any other error was the cancelled waiter's to see)."""
        if not job.failed():
            if then is not None:
                then(job.result())
            return
        try:
            job.result()
        except ContentConflict as exc:  # the alert is written all the same
            with contextlib.suppress(RuntimeError):  # the gateway is closing
                self.threads.submit(self._alert_content_conflict, draft, exc)
        except BaseException:  # noqa: BLE001, S110 - the cancellation goes on
            pass

    async def _refused(self, draft: EventDraft, exc: AuditStoreError) -> AuditWriteError:
        if isinstance(exc, ContentConflict):
            await self.threads.to_end(self._alert_content_conflict, draft, exc)
        return _write_error(draft, exc)

    def _append_soon(self, draft: EventDraft) -> Job[Appended]:
        job: Job[Appended] = Job.outside(asyncio.get_running_loop())
        try:
            self.store.append_soon(draft, job.finish)
        except AuditStoreError as exc:  # refused as it was prepared: nothing was queued
            raise _write_error(draft, exc) from exc
        return job

    def append_many(self, drafts: list[EventDraft]) -> list[Appended]:
        """Append ``drafts`` in one transaction (records that follow no upstream call, such as
        a verify run's outcomes); errors as :meth:`append`."""
        try:
            return self.store.append_many(drafts)
        except AuditStoreError as exc:
            raise AuditWriteError(
                f"the audit records ({len(drafts)}) could not be committed, so the run "
                f"stopped: {exc.message}",
                request_id=drafts[0].request_id if drafts else None,
                hint="Fix the audit database and retry.",
            ) from exc

    def _alert_content_conflict(self, draft: EventDraft, conflict: ContentConflict) -> None:
        """Content planted ahead of its event never happens by accident: say so in the log.

        The alert holds no payload (the refused bytes stay unwritten). If even the alert
        cannot be committed, the refused append's own error is what the caller gets."""
        alert = EventDraft(
            kind=EventKind.INTEGRITY_ALERT,
            request_id=draft.request_id,
            task=draft.task,
            caller=draft.caller,
            request_hash=draft.request_hash,
            data={
                "check": "content_conflict",
                "refused_kind": str(draft.kind),
                "table": conflict.table,
                "digests": list(conflict.digests),
            },
        )
        with contextlib.suppress(AuditStoreError):
            self.store.append(alert)

    # -- one call: intent, attempts, reply or typed failure ---------------------------------

    def commit(
        self, call: CallLabels, intended: Intended, wire: bytes, target: WireTarget | None = None
    ) -> None:
        """Commit ``intended`` with ``wire``, the exact body about to be sent, and, where the
        transport names the model in the URL, ``target`` (where it goes); a retry's bytes,
        announced again, change nothing (the outcome says whether they were the same)."""
        if intended.committed:
            return
        appended = self.append(_intent_draft(call, intended, wire, target))
        intended.wire, intended.seq = wire, appended.seq

    async def acommit(
        self, call: CallLabels, intended: Intended, wire: bytes, target: WireTarget | None = None
    ) -> None:
        """:meth:`commit` for asyncio. The draft is built and prepared on the loop (bounded
        work: a body up to INLINE_WIRE_BYTES, its digest) and committed by the store's
        committer, no thread waiting (:meth:`aappend`); a larger body is drafted and digested
        in a worker thread. Cancelled meanwhile, it waits for the commit's outcome, so
        ``intended`` says whether the intent was committed (and so needs its CANCELLED
        outcome)."""
        if intended.committed:
            return  # a retry's bytes: nothing to write
        if len(wire) > INLINE_WIRE_BYTES:
            job: Job[Any] = self.threads.submit(self.commit, call, intended, wire, target)
            try:
                await job
            except asyncio.CancelledError:
                await job.settled()
                raise
            return
        draft = _intent_draft(call, intended, wire, target)
        job = self._append_soon(draft)
        try:
            appended = await self._awaited(draft, job)
        except asyncio.CancelledError:
            if job.done and not job.failed():  # committed: it needs its CANCELLED outcome
                intended.wire, intended.seq = wire, job.result().seq
            raise
        intended.wire, intended.seq = wire, appended.seq

    def on_wire_for(self, call: CallLabels, intended: Intended) -> OnWire | None:
        if intended.committed:
            return None

        def on_wire(wire: bytes, *, target: WireTarget | None = None) -> None:
            self.commit(call, intended, wire, target)

        return on_wire

    def aon_wire_for(self, call: CallLabels, intended: Intended) -> AsyncOnWire | None:
        """:meth:`on_wire_for` for asyncio (:meth:`acommit`)."""
        if intended.committed:
            return None

        async def on_wire(wire: bytes, *, target: WireTarget | None = None) -> None:
            await self.acommit(call, intended, wire, target)

        return on_wire

    def attempt_failed(self, call: CallLabels, failure: AttemptFailure) -> None:
        self.append(_attempt_draft(call, failure))

    async def aattempt_failed(self, call: CallLabels, failure: AttemptFailure) -> None:
        """:meth:`attempt_failed` for asyncio: drafted on the loop and committed with no
        thread waiting (:meth:`aappend`); an upstream's words past INLINE_WIRE_BYTES (which
        no provider keeps) are drafted in a worker thread."""
        if len(failure.upstream_message or "") > INLINE_WIRE_BYTES:
            await self.threads.submit(self.attempt_failed, call, failure)
            return
        await self.aappend(_attempt_draft(call, failure))

    def send(
        self,
        call: CallLabels,
        provider: Provider,
        body: Mapping[str, Any],
        *,
        api_version: str,
        intent: Intent,
    ) -> Sent:
        """The whole call: the intent committed from the request the provider built, then
        the call (:meth:`call`)."""
        return self.call(call, provider, body, api_version=api_version, intended=Intended(intent))

    # The two I/O loops below mirror each other line for line; the decisions are _failed's.

    def call(
        self,
        call: CallLabels,
        provider: Provider,
        body: Mapping[str, Any],
        *,
        api_version: str,
        intended: Intended,
        timeout_s: float | None = None,
    ) -> Sent:
        """Send a body, its intent committed first (by the provider's ``on_wire``),
        recording each failed attempt."""

        def on_attempt_failed(failure: AttemptFailure) -> None:
            self.attempt_failed(call, failure)

        try:
            reply = provider.send(
                body,
                api_version=api_version,
                on_attempt_failed=on_attempt_failed,
                timeout_s=timeout_s,
                on_wire=self.on_wire_for(call, intended),
            )
        except AuditError:
            raise  # the intent or an attempt could not be recorded: stopped, fail closed
        except Exception as exc:  # noqa: BLE001 - every failure after the intent gets an outcome
            return failed(provider, call, intended, exc)
        return replied(provider, call, intended, reply)

    async def acall(
        self,
        call: CallLabels,
        provider: Provider,
        body: Mapping[str, Any],
        *,
        api_version: str,
        intended: Intended,
        timeout_s: float | None = None,
    ) -> Sent:
        """:meth:`call` for asyncio: the intent and each attempt's record join the store's
        group commit from the loop, no thread waiting (an fsync never blocks the event loop),
        and are awaited by the provider before it sends (again)."""

        async def on_attempt_failed(failure: AttemptFailure) -> None:
            await self.aattempt_failed(call, failure)

        try:
            reply = await provider.asend(
                body,
                api_version=api_version,
                on_attempt_failed=on_attempt_failed,
                timeout_s=timeout_s,
                on_wire=self.aon_wire_for(call, intended),
            )
        except AuditError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure after the intent gets an outcome
            return failed(provider, call, intended, exc)
        return replied(provider, call, intended, reply)


def _intent_draft(
    call: CallLabels, intended: Intended, wire: bytes, target: WireTarget | None
) -> EventDraft:
    intent = intended.intent
    data = intent.data if target is None else {**intent.data, "target": target.audit_data()}
    return call.draft(
        intent.kind,
        data,
        payloads={**intent.payloads, **stored_payloads("request_body", wire)},
        policy_content=intent.policy_content,
        policy_canonical=intent.policy_canonical,
    )


def _attempt_draft(call: CallLabels, failure: AttemptFailure) -> EventDraft:
    # upstream_message may quote the prompt: logs and error messages may not hold it, and
    # the event's data may not either (no erasure reaches it there, a reviewer reads it
    # without an ACCESS record): it is the event's payload, content like the prompt.
    data, payloads = quoted_text(failure.audit_data(), "upstream_message")
    return call.draft(EventKind.ATTEMPT_FAILED, {**call.attempt_context, **data}, payloads=payloads)


def _write_error(draft: EventDraft, exc: AuditStoreError) -> AuditWriteError:
    return AuditWriteError(
        f"the audit record ({draft.kind}) could not be committed, so the gateway "
        f"stopped: {exc.message}",
        request_id=draft.request_id,
        hint="Nothing was sent upstream after this point. Fix the audit database and retry.",
    )


def _refuse_retired_signer(reads: StoreAdapter, signer: Signer, check: SignatureCheck) -> None:
    """A gateway whose record key a rotation retired would write events every reader refuses:
    it does not start (an old host or a restored configuration, docs/security.md). Only a
    rotation signed by a key this gateway trusts counts, as for every reader."""
    retired = reads.run(KeyEras.read, check).retired.get(signer.key_id)
    if retired is None:
        return
    reads.close()
    raise ConfigurationError(
        f"the record key {signer.key_id} was retired by the key rotation at seq "
        f"{retired.from_seq} (signed by key {retired.by_key_id}): every reader refuses what "
        "it signs from then on, so the gateway does not start with it.",
        hint="Configure the current record key (GATEWAY_RECORD_KEY_FILE or GATEWAY_RECORD_KEY); "
        "see docs/security.md, 'Rotating the key: key eras'.",
    )


def _holds_keyed_hashes(store: AuditStore) -> bool:
    """Whether any event records a request hash keyed under a cache key (asked only before
    a new cache key would be made: one statement, stopping at the first)."""
    keyed = select(EVENTS.c.seq).where(EVENTS.c.request_hash.like(KEYED_PREFIX + "%")).limit(1)
    with store.backend.reader.connect() as conn:
        return conn.execute(keyed).first() is not None
