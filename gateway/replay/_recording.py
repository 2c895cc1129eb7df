"""What a replay writes to the log: a live send (its intent, then its attempts) and the REPLAY
outcome event that records each row.

    row = Row({}, policy=recorded.policy)
    sent = send(recorder, providers, Call(...), body, row, caller=event_caller(op, first))
    keep_sent(row, sent)
    result, draft = outcome_event(run_id, mode, target, recorded, row, caller)

Split from gateway.replay._runner (which decides what each request's replay is); this module
only says how it is recorded (DESIGN §3, invariant 1: no upstream call the log does not hold).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit import EventDraft, EventKind, StoredEvent
from gateway._attachment_payloads import stored_payloads
from gateway._inputs import EXPERIMENT_CALLER
from gateway._keys import GATEWAY_VERSION
from gateway.policy import Policy
from gateway.providers.registry import Providers
from gateway.replay._model import Mode, RequestReplay
from gateway.replay._recorded import Recorded
from gateway.request import CallLabels, Intent, Recorder, Replied, Sent


@dataclass(frozen=True)
class Call:
    """One live send of a replay: where it is recorded and what goes on the wire."""

    run_id: str
    mode: Mode
    recorded: Recorded
    target: str | None
    provider: str
    api_version: str
    policy: Policy | None
    request_hash: str | None


@dataclass
class Row:
    """A result being built, plus what its REPLAY event records beyond the row."""

    fields: dict[str, Any]
    policy: Policy | None = None
    request_hash: str | None = None
    payloads: dict[str, bytes] = field(default_factory=dict)
    attempts: int = 0
    intent_seq: int | None = None
    # A live send's answer: the usage billed and the model that answered (audit usage sums it)
    billed: dict[str, Any] = field(default_factory=dict)


def event_caller(operator: str | None, first: StoredEvent) -> str | None:
    """Who a replay event is recorded under: the operator, else the replayed request's
    caller, but never the experiment caller (the replay's own record must stay listed)."""
    if operator is not None:
        return operator
    return first.caller if first.caller != EXPERIMENT_CALLER else None


def _subject(first: StoredEvent) -> dict[str, Any]:
    """The replayed request's data-subject tag (a keyed digest), when it recorded one: a
    replay's events copy its content, and are found and erased with it (gateway.evidence)."""
    tag = first.data.get("subject") if first.kind is EventKind.REQUEST else None
    return {"subject": tag} if isinstance(tag, str) else {}


def _new_content(policy: Policy | None, first: StoredEvent) -> dict[str, Any] | None:
    """The policy's content when the log does not hold it under the request's fingerprint
    (a migration's or a candidate folder's version is stored with the event naming it)."""
    if policy is None or policy.fingerprint == first.policy_fingerprint:
        return None
    return policy.content()


def send(
    recorder: Recorder,
    providers: Providers,
    call: Call,
    body: dict[str, Any],
    row: Row,
    *,
    caller: str | None,
) -> Sent:
    """Record the intent (exact wire bytes), then send, recording each failed attempt."""
    first = call.recorded.first
    policy = call.policy
    labels = CallLabels(
        request_id=call.run_id,
        task=first.task,
        caller=caller,
        policy_fingerprint=policy.fingerprint if policy else first.policy_fingerprint,
        request_hash=call.request_hash,
        attempt_context={"original_request_id": call.recorded.request_id},
    )
    intent = Intent(
        EventKind.REPLAY,
        {
            "phase": "intent",
            "mode": call.mode.value,
            "original_request_id": call.recorded.request_id,
            "original_seq": first.seq,
            "original_caller": first.caller,
            **_subject(first),
            "target_model": call.target,
            "provider": call.provider,
            "api_version": call.api_version,
            "gateway_version": GATEWAY_VERSION,
        },
        policy_content=_new_content(policy, first),
    )
    sent = recorder.send(
        labels, providers.get(call.provider), body, api_version=call.api_version, intent=intent
    )
    row.intent_seq = sent.intent_seq
    return sent


def keep_sent(row: Row, sent: Sent) -> None:
    """What a send leaves on the row: its attempts and, for an answer, its bytes and usage."""
    if isinstance(sent, Replied):
        row.attempts = sent.reply.attempts
        response = sent.reply.response
        row.billed = {"usage": response.get("usage") or {}, "model": response.get("model")}
        row.payloads = {
            **stored_payloads("request_body", sent.reply.request_bytes),
            "response_body": sent.reply.response_bytes,
        }
    else:
        row.attempts = sent.error.attempts


def outcome_event(
    run_id: str,
    mode: Mode,
    target: str | None,
    recorded: Recorded,
    built: Row,
    *,
    caller: str | None,
) -> tuple[RequestReplay, EventDraft]:
    """The row and the REPLAY event that records it. ``target``: the --model target's label."""
    first = recorded.first
    policy = built.policy
    row = RequestReplay(
        request_id=recorded.request_id,
        seq=first.seq,
        task=first.task,
        caller=first.caller,
        model_id=recorded.model_id,
        target_model=target,
        mode=mode,
        recorded_policy=first.policy_fingerprint,
        replayed_policy=policy.fingerprint if policy is not None else None,
        **built.fields,
    )
    data = {
        "phase": "outcome",
        "intent_seq": built.intent_seq,
        "mode": mode.value,
        "original_request_id": recorded.request_id,
        "original_seq": first.seq,
        "original_caller": first.caller,
        **_subject(first),
        "outcome": row.outcome.value,
        "reason": row.reason,
        "target_model": target,
        "checks": [{"name": c.name, "ok": c.ok} for c in row.checks],
        "findings": len(row.findings),
        "request_changes": len(row.request_changes),
        "similarity": row.similarity,
        "json_changes": len(row.json_changes),
        "attempts": built.attempts,
        "gateway_version": GATEWAY_VERSION,
        **built.billed,
    }
    labels = CallLabels(
        request_id=run_id,
        task=first.task,
        caller=caller,
        policy_fingerprint=policy.fingerprint if policy else first.policy_fingerprint,
        request_hash=built.request_hash,
    )
    draft = labels.draft(
        EventKind.REPLAY, data, payloads=built.payloads, policy_content=_new_content(policy, first)
    )
    return row, draft
