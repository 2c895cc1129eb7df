"""A call's terminal outcome as event drafts, built from what ended the call with no I/O: the
RESPONSE (with the answer's output check and alerts) and the ANSWER_ALERT events that name
it, FAILED, CANCELLED. CallRecords appends them: Gateway in the caller's thread,
AsyncGateway on its event loop when the content is small (:func:`drafted_on_loop`), else in
a worker thread; the drafts, and so the recorded bytes, are the same either way.

    answer = response_draft(prepared, reply, wire)
    appended = recorder.append(answer.draft)
    for alert in answer.alerts:
        recorder.append(alert_draft(prepared, alert, appended.seq))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit import EventDraft, EventKind
from gateway._attachment_payloads import stored_payloads
from gateway._output_check import OutputCheck, check_json_output
from gateway.errors import UpstreamError
from gateway.providers.base import ProviderReply
from gateway.providers.stream import MessageAssembler
from gateway.request._answer_checks import answer_alerts, answer_facts
from gateway.request._prepared import Prepared
from gateway.request._record_facts import (
    checked_text,
    finite,
    partial_facts,
    quoted_text,
    stop_details_facts,
)
from gateway.request._recording import INLINE_WIRE_BYTES

__all__ = [
    "DraftedAnswer",
    "alert_draft",
    "cancelled_draft",
    "drafted_on_loop",
    "failed_draft",
    "response_draft",
]


def drafted_on_loop(reply: ProviderReply | None, *texts: str | None) -> bool:
    """Whether an outcome holding ``reply`` and ``texts`` is drafted and digested on the
    event loop: their bytes (the answer, the request bytes it records, an upstream's detail)
    total at most INLINE_WIRE_BYTES, as for an intent (a text's length stands for its bytes:
    a bound within four times, not worth encoding to learn)."""
    size = sum(len(text) for text in texts if text)
    if reply is not None:
        size += len(reply.response_bytes) + len(reply.request_bytes)
    return size <= INLINE_WIRE_BYTES


@dataclass(frozen=True)
class DraftedAnswer:
    """A RESPONSE drafted from its answer: the draft, its data (which the replay cache
    reads), the JSON check run on it, and its alerts (each an ANSWER_ALERT to follow)."""

    draft: EventDraft
    data: dict[str, Any]
    check: OutputCheck | None
    alerts: list[dict[str, Any]]


def response_draft(prepared: Prepared, reply: ProviderReply, wire: bytes) -> DraftedAnswer:
    """The RESPONSE event. ``wire`` is what the intent recorded as about to be sent; the
    event says whether the bytes actually sent were exactly those (invariant 3)."""
    plan = prepared.plan
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
        "stop_reason": reply.response.get("stop_reason"),
        "usage": reply.response.get("usage") or {},
        "upstream_request_id": reply.upstream_request_id,
        "latency_ms": finite(reply.latency_ms),
        "attempts": reply.attempts,
        "output_check": check.record() if check else {"checked": False},
        "rate_limits": dict(reply.rate_limits),
        "sent_as_recorded": reply.request_bytes == wire,
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
    draft = prepared.labels.draft(
        EventKind.RESPONSE,
        data,
        payloads={
            "response_body": reply.response_bytes,
            **stored_payloads("request_wire", reply.request_bytes),
        },
    )
    return DraftedAnswer(draft, data, check, alerts)


def alert_draft(prepared: Prepared, alert: dict[str, Any], response_seq: int) -> EventDraft:
    """The ANSWER_ALERT event of one of a RESPONSE's alerts, naming it by its seq."""
    return prepared.labels.draft(EventKind.ANSWER_ALERT, {**alert, "response_seq": response_seq})


def failed_draft(
    prepared: Prepared,
    error: UpstreamError,
    *,
    detail: str | None = None,
    partial: MessageAssembler | None = None,
) -> EventDraft:
    """The FAILED event. ``detail`` may quote input: it goes to the ``detail`` payload
    (content, erasable), never to the event's data. ``partial``: what a stream delivered."""
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
    return prepared.labels.draft(EventKind.FAILED, data, payloads=payloads)


def cancelled_draft(
    prepared: Prepared,
    *,
    reason: str,
    partial: MessageAssembler | None = None,
    reply: ProviderReply | None = None,
) -> EventDraft:
    """The CANCELLED event: ``partial`` is what a stream delivered; ``reply`` the whole
    answer when it had arrived (``answered`` says which)."""
    data: dict[str, Any] = {"reason": reason, "answered": reply is not None}
    payloads: dict[str, bytes] = {}
    if partial is not None:
        data["partial"], payloads = partial_facts(partial)
    if reply is not None:
        data["usage"] = reply.response.get("usage") or {}
        data["upstream_request_id"] = reply.upstream_request_id
        data["stop_reason"] = reply.response.get("stop_reason")
        payloads = {"response_body": reply.response_bytes}
    return prepared.labels.draft(EventKind.CANCELLED, data, payloads=payloads)
