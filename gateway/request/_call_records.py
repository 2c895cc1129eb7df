"""The events that begin and end a call the pipeline prepared: its REQUEST intent, then its one
terminal outcome (RESPONSE, FAILED or CANCELLED), or its CACHE_HIT; the Result a RESPONSE or a
hit stands for; and the REJECTED event of a request refused before it became a call.

    records = CallRecords(recorder, cache, durability="fsync", policy_bytes=policy_bytes)
    intent = records.intent(prepared)                        # committed by the recorder
    result = records.record_outcome(prepared, reply, wire)    # or record_failed / _cancelled
    result = records.cache_hit(prepared, cache.lookup(prepared))
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from audit import EventKind
from gateway._attachment_payloads import stored_payloads
from gateway._attachments import attachments
from gateway._inputs import EXPERIMENT_CALLER, safe_label
from gateway._keys import GATEWAY_VERSION
from gateway._log import log
from gateway._output_check import OutputCheck, check_json_output, response_text
from gateway.errors import (
    AnswerAlertWarning,
    GatewayError,
    OutputValidationError,
    PolicyNotApproved,
    UpstreamError,
)
from gateway.policy import Policy
from gateway.providers.base import ProviderReply
from gateway.providers.stream import MessageAssembler
from gateway.request._answer_checks import answer_alerts, answer_facts
from gateway.request._call_types import CallLabels, Intent
from gateway.request._prepared import Prepared
from gateway.request._record_facts import (
    checked_text,
    contract_facts,
    finite,
    partial_facts,
    quoted_text,
    recorded_overrides,
    refused_input_summary,
    replayability,
    stop_details_facts,
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
        data: dict[str, Any] = {
            "error": type(error).__name__,
            "status": error.status,
            "error_type": error.error_type,
            "upstream_request_id": error.upstream_request_id,
            "attempts": error.attempts,
            "reason": error.message,
            "detail": detail,
        }
        data, payloads = quoted_text(data, "detail")  # content: in a payload, erasable
        if partial is not None:
            data["partial"], streamed = partial_facts(partial)
            payloads.update(streamed)
        self.recorder.append(prepared.labels.draft(EventKind.FAILED, data, payloads=payloads))
        log.warning(
            "request_failed",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            status=error.status,
            error_type=error.error_type,
            attempts=error.attempts,
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
        data: dict[str, Any] = {"reason": reason, "answered": reply is not None}
        payloads: dict[str, bytes] = {}
        if partial is not None:
            data["partial"], payloads = partial_facts(partial)
        if reply is not None:
            data["usage"] = reply.response.get("usage") or {}
            data["upstream_request_id"] = reply.upstream_request_id
            data["stop_reason"] = reply.response.get("stop_reason")
            payloads = {"response_body": reply.response_bytes}
        self.recorder.append(prepared.labels.draft(EventKind.CANCELLED, data, payloads=payloads))
        log.warning(
            "request_cancelled",
            task=prepared.plan.task,
            request_id=prepared.request_id,
            reason=reason,
            answered=reply is not None,
        )

    def record_outcome(self, prepared: Prepared, reply: ProviderReply, wire: bytes) -> Result:
        """Commit the RESPONSE event. ``wire`` is what the intent recorded as about to be sent;
        the event says whether the bytes actually sent were exactly those (invariant 3)."""
        plan = prepared.plan
        sent_as_recorded = reply.request_bytes == wire
        if not sent_as_recorded:
            log.error("wire_mismatch", task=plan.task, request_id=prepared.request_id)
        stop_reason = reply.response.get("stop_reason")
        check = (
            check_json_output(checked_text(plan, reply.response), plan.output_schema)
            if plan.output_format == "json"
            else None
        )
        data = {
            "ok": check.ok if check else True,
            "status": reply.status,
            "model": reply.response.get("model"),
            "response_id": reply.response.get("id"),
            "stop_reason": stop_reason,
            "usage": reply.response.get("usage") or {},
            "upstream_request_id": reply.upstream_request_id,
            "latency_ms": finite(reply.latency_ms),
            "attempts": reply.attempts,
            "output_check": check.record() if check else {"checked": False},
            "rate_limits": dict(reply.rate_limits),
            "sent_as_recorded": sent_as_recorded,
        }
        if reply.response.get("stop_details") is not None:
            data["stop_details"] = stop_details_facts(reply.response["stop_details"])
        # What the answer says about itself (model, region, tier, thinking, server edits),
        # and where it differs from the policy: alerts, in the RESPONSE itself (one commit
        # with the answer) and each as an ANSWER_ALERT event that names it (to be found).
        data.update(answer_facts(plan, reply.response))
        alerts = answer_alerts(plan, reply.response)
        if alerts:
            data["alerts"] = alerts
        if reply.stream is not None:
            # The response body is the assembled message (what replay serves); the event
            # stream itself is recorded by the digest of its bytes as received.
            data["stream"] = reply.stream.model_dump(mode="json")
        appended = self.recorder.append(
            prepared.labels.draft(
                EventKind.RESPONSE,
                data,
                payloads={
                    "response_body": reply.response_bytes,
                    **stored_payloads("request_wire", reply.request_bytes),
                },
            )
        )
        for alert in alerts:
            self.recorder.append(
                prepared.labels.draft(
                    EventKind.ANSWER_ALERT, {**alert, "response_seq": appended.seq}
                )
            )
            log.warning(
                "answer_alert",
                task=plan.task,
                request_id=prepared.request_id,
                check=alert["check"],
                seq=appended.seq,
            )
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
        usage = reply.response.get("usage") or {}
        log.info(
            "request_completed",
            task=plan.task,
            request_id=prepared.request_id,
            seq=appended.seq,
            cached=False,
            latency_ms=round(reply.latency_ms, 3),
            tokens=token_total(usage),
            attempts=reply.attempts,
            output_ok=data["ok"],
        )
        if check is not None and not check.ok:
            raise OutputValidationError(
                f"the model's answer for task {plan.task!r} failed the JSON check: "
                f"{check.problem}. The answer is recorded at seq {appended.seq}, flagged.",
                request_id=prepared.request_id,
                seq=appended.seq,
            )
        result = self.result(
            prepared, reply.response, stop_reason, appended.seq, cached=False, checked=check
        )
        if alerts:
            checks = tuple(str(a["check"]) for a in alerts)
            result = replace(result, alerts=checks)
            warnings.warn(
                AnswerAlertWarning(
                    f"the answer to request {prepared.request_id} differs from what task "
                    f"{plan.task!r}'s policy pinned ({', '.join(checks)}); it is recorded at "
                    f"seq {appended.seq} with an answer alert.",
                    request_id=prepared.request_id,
                    seq=appended.seq,
                    checks=checks,
                ),
                stacklevel=2,
            )
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
