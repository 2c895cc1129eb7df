"""The events that begin and end a call the pipeline prepared: its REQUEST intent, then its one
terminal outcome (RESPONSE, FAILED or CANCELLED), or its CACHE_HIT; the Result a RESPONSE or a
hit stands for; and the REJECTED event of a request refused before it became a call.

    records = CallRecords(recorder, cache, durability="fsync", policy_bytes=policy_bytes)
    intent = records.intent(prepared)                        # committed by the recorder
    result = records.record_outcome(prepared, reply, wire)    # or record_failed / _cancelled
    result = records.cache_hit(prepared, cache.lookup(prepared))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from audit import Appended, EventDraft, EventKind
from gateway._attachments import attachments
from gateway._inputs import EXPERIMENT_CALLER, safe_label
from gateway._keys import GATEWAY_VERSION
from gateway._log import log
from gateway._output_check import OutputCheck, check_json_output, response_text
from gateway.errors import (
    GatewayError,
    OutputValidationError,
    PolicyNotApproved,
    UpstreamError,
)
from gateway.policy import Policy
from gateway.providers.base import ProviderReply
from gateway.providers.stream import MessageAssembler
from gateway.request._alert_warning import warn_of_alerts
from gateway.request._call_types import CallLabels, Intent
from gateway.request._outcome_drafts import (
    DraftedAnswer,
    alert_draft,
    cancelled_draft,
    drafted_on_loop,
    failed_draft,
    response_draft,
)
from gateway.request._prepared import Prepared
from gateway.request._record_facts import (
    checked_text,
    contract_facts,
    recorded_overrides,
    refused_input_summary,
    replayability,
    stop_sequence,
    token_total,
)
from gateway.request._recording import Recorder
from gateway.request._served import Answered, ReplayCache, Served
from gateway.result import Result, answer_blocks

__all__ = ["CallRecords"]


class CallRecords:
    """``cache``: the replay cache each RESPONSE is offered to; ``policy_bytes``: a policy's
    canonical content (the pipeline's, computed once per policy)."""

    def __init__(
        self,
        recorder: Recorder,
        cache: ReplayCache,
        *,
        durability: str,
        policy_bytes: Callable[[Policy], bytes],
    ) -> None:
        self.recorder = recorder
        self.durability = durability
        self.policy_bytes = policy_bytes
        self._cache = cache

    def rejected(
        self,
        request_id: str,
        task: object,
        caller: object,
        policy: Policy | None,
        overrides: object,
        error: GatewayError,
    ) -> None:
        """Record the REJECTED event of a request its policy or input refused."""
        shown_caller = safe_label(caller) if caller is not None else None
        claimed = None
        if shown_caller == EXPERIMENT_CALLER and (policy is None or policy.derived is None):
            # A refusal recorded under the reserved name would be left out of `audit list`
            # like an experiment sample: the attempt is listed, the claimed name kept in data.
            shown_caller, claimed = None, EXPERIMENT_CALLER
        fingerprint = policy.fingerprint if policy else None
        content: dict[str, Any] | None = None
        if policy is None and isinstance(error, PolicyNotApproved) and error.content:
            fingerprint, content = error.fingerprint, error.content  # the routing table's
        labels = CallLabels(
            request_id=request_id,
            task=safe_label(task),
            caller=shown_caller,
            policy_fingerprint=fingerprint,
            request_hash=None,
        )
        self.recorder.append(
            labels.draft(
                EventKind.REJECTED,
                {
                    "error": type(error).__name__,
                    "key": getattr(error, "key", None),
                    "reason": safe_label(error.message),
                    **refused_input_summary(overrides),
                    "gateway_version": GATEWAY_VERSION,
                    **({"claimed_caller": claimed} if claimed else {}),
                },
                policy_canonical=self.policy_bytes(policy) if policy else None,
                policy_content=content,
            )
        )
        log.info(
            "request_rejected",
            task=safe_label(task),
            request_id=request_id,
            error=type(error).__name__,
        )

    def intent(self, prepared: Prepared) -> Intent:
        """The REQUEST event committed before the call (the recorder adds the wire bytes)."""
        plan = prepared.plan
        # Only a streamed or time-limited request says so, so other requests record what
        # they always did.
        delivery: dict[str, Any] = {}
        if prepared.stream:
            delivery["stream"] = True
        if prepared.timeout_s is not None:
            delivery["timeout_s"] = prepared.timeout_s
        # Each image and document by digest, media type and size (its bytes are in the body).
        files = attachments(plan.body.get("messages"))
        if files:
            delivery["attachments"] = files
        if prepared.subject_tag is not None:  # keyed: never the subject's identifier
            delivery["subject"] = prepared.subject_tag
            # Which cache key made it: after the key is replaced, the tag is looked up under
            # the key that made it (gateway.keys.cache_key_ring).
            delivery["subject_key"] = prepared.subject_key
        requested, overrides = recorded_overrides(plan)
        return Intent(
            EventKind.REQUEST,
            {
                **delivery,
                "provider": plan.provider,
                "api_version": plan.api_version,
                "model_id": plan.model_id,
                "model_version": prepared.model_version,
                **requested,
                "effective": plan.effective,
                **contract_facts(plan),
                "cache_mode": plan.cache_mode,
                "key_scope": plan.key_scope,
                # A derived policy (experiment, offline) names itself and the reviewed one.
                "derived": prepared.policy.derived.model_dump()
                if prepared.policy.derived
                else None,
                "output_format": plan.output_format,
                **replayability(prepared.policy),
                "durability": self.durability,
                "gateway_version": GATEWAY_VERSION,
            },
            policy_canonical=self.policy_bytes(prepared.policy),
            payloads=overrides,
        )

    def record_failed(
        self,
        prepared: Prepared,
        error: UpstreamError,
        *,
        detail: str | None = None,
        partial: MessageAssembler | None = None,
    ) -> None:
        """Record the FAILED outcome. ``detail`` may quote input: it goes to the audit record
        as the ``detail`` payload (content, erasable), never to a log, an error message or
        the event's data. ``partial``: what a stream delivered first."""
        error.request_id = prepared.request_id
        self._ended(
            lambda: failed_draft(prepared, error, detail=detail, partial=partial),
            lambda: _log_failed(prepared, error),
        )

    async def arecord_failed(
        self,
        prepared: Prepared,
        error: UpstreamError,
        *,
        detail: str | None = None,
        partial: MessageAssembler | None = None,
    ) -> None:
        """:meth:`record_failed` for asyncio (see :meth:`arecord_outcome`); with a stream's
        partial answer (whose size is known only once serialised) in a worker thread."""
        error.request_id = prepared.request_id
        await self._aended(
            lambda: failed_draft(prepared, error, detail=detail, partial=partial),
            lambda: _log_failed(prepared, error),
            on_loop=partial is None and drafted_on_loop(None, detail),
        )

    def record_cancelled(
        self,
        prepared: Prepared,
        *,
        reason: str,
        partial: MessageAssembler | None = None,
        reply: ProviderReply | None = None,
    ) -> None:
        """Record the CANCELLED outcome: the caller left (closed a stream early, was cancelled,
        timed out or interrupted) before the answer was recorded. ``partial`` is what a stream
        delivered; ``reply`` the whole answer when it had arrived (``answered`` says which)."""
        self._ended(
            lambda: cancelled_draft(prepared, reason=reason, partial=partial, reply=reply),
            lambda: _log_cancelled(prepared, reason, reply),
        )

    async def arecord_cancelled(
        self,
        prepared: Prepared,
        *,
        reason: str,
        partial: MessageAssembler | None = None,
        reply: ProviderReply | None = None,
    ) -> None:
        """:meth:`record_cancelled` for asyncio (see :meth:`arecord_failed`); the record is
        committed even if the caller is cancelled again meanwhile."""
        await self._aended(
            lambda: cancelled_draft(prepared, reason=reason, partial=partial, reply=reply),
            lambda: _log_cancelled(prepared, reason, reply),
            on_loop=partial is None and drafted_on_loop(reply),
            to_end=True,
        )

    def _ended(self, draft: Callable[[], EventDraft], logged: Callable[[], None]) -> None:
        """Append an outcome that carries no answer to return (FAILED, CANCELLED), then log it."""
        self.recorder.append(draft())
        logged()

    async def _aended(
        self,
        draft: Callable[[], EventDraft],
        logged: Callable[[], None],
        *,
        on_loop: bool,
        to_end: bool = False,
    ) -> None:
        """:meth:`_ended` for asyncio: ``on_loop`` (bounded work), drafted on the loop and
        committed with no thread waiting, the log line after the commit; else drafted and
        appended in a worker thread, which ``to_end`` finishes even if the caller is
        cancelled meanwhile."""
        if on_loop:
            await self.recorder.aappend(draft(), then=lambda _: logged())
        elif to_end:
            await self.recorder.threads.to_end(self._ended, draft, logged)
        else:
            await self.recorder.threads.submit(self._ended, draft, logged)

    def record_outcome(self, prepared: Prepared, reply: ProviderReply, wire: bytes) -> Result:
        """Commit the RESPONSE event (and an ANSWER_ALERT for each alert it raises). ``wire``
        is what the intent recorded as about to be sent; the event says whether the bytes
        actually sent were exactly those (invariant 3). An answer with alerts warns its
        caller (an AnswerAlertWarning at the caller's line)."""
        result = self._recorded(prepared, reply, wire)
        warn_of_alerts(prepared.plan.task, result)
        return result

    def _recorded(self, prepared: Prepared, reply: ProviderReply, wire: bytes) -> Result:
        return self._answered(prepared, reply, self._drafted(prepared, reply, wire))

    async def arecord_outcome(
        self, prepared: Prepared, reply: ProviderReply, wire: bytes
    ) -> Result:
        """:meth:`record_outcome` for asyncio: drafted on the loop (bounded work: an answer up
        to INLINE_WIRE_BYTES, its digests) and committed by the store's committer with no
        thread waiting; a larger answer, or one with alerts (several appends, each naming the
        RESPONSE), is recorded in a worker thread. Cancelled meanwhile, the cancellation goes
        on at once; the outcome is committed all the same, its cache offer and log after it.
        An answer with alerts warns its caller from the loop, not from the worker thread."""
        result = await self._arecorded(prepared, reply, wire)
        warn_of_alerts(prepared.plan.task, result)
        return result

    async def _arecorded(self, prepared: Prepared, reply: ProviderReply, wire: bytes) -> Result:
        threads = self.recorder.threads
        if not drafted_on_loop(reply):
            result: Result = await threads.submit(self._recorded, prepared, reply, wire)
            return result
        answer = self._drafted(prepared, reply, wire)
        if answer.alerts:
            result = await threads.submit(self._answered, prepared, reply, answer)
            return result
        appended = await self.recorder.aappend(
            answer.draft, then=functools.partial(self._offered, prepared, reply, answer)
        )
        return self._result(prepared, reply, answer, appended)

    def _drafted(self, prepared: Prepared, reply: ProviderReply, wire: bytes) -> DraftedAnswer:
        answer = response_draft(prepared, reply, wire)
        if not answer.data["sent_as_recorded"]:
            log.error("wire_mismatch", task=prepared.plan.task, request_id=prepared.request_id)
        return answer

    def _answered(self, prepared: Prepared, reply: ProviderReply, answer: DraftedAnswer) -> Result:
        """Append a drafted RESPONSE and its alerts; offer it to the cache; its Result."""
        appended = self.recorder.append(answer.draft)
        for alert in answer.alerts:
            self.recorder.append(alert_draft(prepared, alert, appended.seq))
            log.warning(
                "answer_alert",
                task=prepared.plan.task,
                request_id=prepared.request_id,
                check=alert["check"],
                seq=appended.seq,
            )
        self._offered(prepared, reply, answer, appended)
        return self._result(prepared, reply, answer, appended)

    def _offered(
        self, prepared: Prepared, reply: ProviderReply, answer: DraftedAnswer, appended: Appended
    ) -> None:
        """What follows a committed RESPONSE whoever waits for it: the cache offer, the log."""
        data = answer.data
        self._cache.offer(
            prepared,
            Answered(
                request_id=prepared.request_id,
                seq=appended.seq,
                hash=appended.hash,
                data=data,
                response=reply.response,
                size=len(reply.response_bytes),
            ),
        )
        log.info(
            "request_completed",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            seq=appended.seq,
            cached=False,
            latency_ms=round(reply.latency_ms, 3),
            tokens=token_total(reply.response.get("usage") or {}),
            attempts=reply.attempts,
            output_ok=data["ok"],
        )

    def _result(
        self, prepared: Prepared, reply: ProviderReply, answer: DraftedAnswer, appended: Appended
    ) -> Result:
        """The Result of a recorded RESPONSE (its ``alerts`` named), or OutputValidationError
        for a JSON answer that failed its check."""
        plan, check, alerts = prepared.plan, answer.check, answer.alerts
        if check is not None and not check.ok:
            raise OutputValidationError(
                f"the model's answer for task {plan.task!r} failed the JSON check: "
                f"{check.problem}. The answer is recorded at seq {appended.seq}, flagged.",
                request_id=prepared.request_id,
                seq=appended.seq,
            )
        stop_reason = reply.response.get("stop_reason")
        result = self.result(
            prepared, reply.response, stop_reason, appended.seq, cached=False, checked=check
        )
        if alerts:
            result = replace(result, alerts=tuple(str(a["check"]) for a in alerts))
        return result

    def cache_hit(self, prepared: Prepared, served: Served) -> Result:
        """Commit the CACHE_HIT event that serves ``served`` (a replay hit, stage 4)."""
        hit_data: dict[str, Any] = {
            "served_seq": served.seq,
            "served_request_id": served.request_id,
            "served_hash": served.hash,
        }
        if prepared.stream:
            hit_data["stream"] = True
        labels = prepared.labels
        if served.request_hash is not None and served.request_hash != labels.request_hash:
            # An answer recorded under the plain hash (before keyed hashes): the hit names it
            # under that hash, as verify requires of a hit and the RESPONSE it serves.
            labels = replace(labels, request_hash=served.request_hash)
        appended = self.recorder.append(labels.draft(EventKind.CACHE_HIT, hit_data))
        result = self.result(
            prepared, served.response, served.stop_reason, appended.seq, cached=True
        )
        log.info(
            "request_completed",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            seq=appended.seq,
            cached=True,
            latency_ms=0.0,
            tokens=0,
            attempts=0,
        )
        return result

    # -- helpers ---------------------------------------------------------------------------

    def result(
        self,
        prepared: Prepared,
        response: Mapping[str, Any],
        stop_reason: str | None,
        seq: int,
        *,
        cached: bool,
        checked: OutputCheck | None = None,
    ) -> Result:
        """``checked``: the JSON check already run on this answer, so it is not parsed twice."""
        text = response_text(response)
        value = None
        if prepared.plan.output_format == "json":
            value = (
                checked or check_json_output(checked_text(prepared.plan, response), None)
            ).value
        blocks, tool_uses = answer_blocks(response)
        return Result(
            text=text,
            json=value,
            request_id=prepared.request_id,
            request_hash=prepared.request_hash,
            seq=seq,
            cached=cached,
            model=str(response.get("model") or prepared.plan.model_id),
            usage=dict(response.get("usage") or {}),
            policy_fingerprint=prepared.policy.fingerprint,
            stop_reason=stop_reason,
            stop_sequence=stop_sequence(response),
            content=blocks,
            tool_uses=tool_uses,
            capped=dict(prepared.plan.capped),
        )


def _log_failed(prepared: Prepared, error: UpstreamError) -> None:
    log.warning(
        "request_failed",
        task=prepared.plan.task,
        request_id=prepared.request_id,
        status=error.status,
        error_type=error.error_type,
        attempts=error.attempts,
    )


def _log_cancelled(prepared: Prepared, reason: str, reply: ProviderReply | None) -> None:
    log.warning(
        "request_cancelled",
        task=prepared.plan.task,
        request_id=prepared.request_id,
        reason=reason,
        answered=reply is not None,
    )
