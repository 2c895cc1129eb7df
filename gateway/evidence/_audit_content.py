"""What a recorded request said and got back, read only after its record checks out.

    found = recorded_content(store, events, signature=check)
    if found.problems: ...refuse, show nothing...
    found.content.system, found.content.messages, found.content.answer

The content lives in the payloads a request's events reference: the wire body sent
(``request_body`` of the REQUEST: system prompt, messages) and the answer (``response_body``
of the RESPONSE, or what a failed or cancelled stream delivered, ``partial_response``). A
cache hit's content is the RESPONSE it served. Before any of it is read, the events are put
through the read path's own check (:func:`audit.verify.authenticity.check_outcome`: hash, link,
columns, record signature under the trusted keys, the preceding REQUEST, payload digests),
so a reviewer is never shown what the gateway itself would refuse to serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from audit import AuditStore, AuditStoreError, EventFilter, EventKind, StoredEvent
from audit.errors import ContentNotPermitted
from audit.sealing import opened, salt_of
from audit.store.bounded import UnreadableJSON
from audit.store.bounded import loads as bounded_loads
from audit.verify.authenticity import SignatureCheck, check_event, check_outcome
from audit.verify.lifecycle import TERMINAL
from gateway._attachment_payloads import ATTACHMENT_PREFIX, restored

__all__ = [
    "ContentPlan",
    "ContentRead",
    "RecordedContent",
    "content_plan",
    "parsed_payload",
    "recorded_content",
    "selected_by_export",
    "shown_parts",
]

# What a content read shows, named in its ACCESS event.
PARTS = ("system_prompt", "messages", "answer")
ANSWERS = ("response_body", "partial_response")


class RecordedContent(BaseModel):
    """A request's content exactly as recorded (JSON values as they were on the wire)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str
    task: str | None
    caller: str | None
    policy_fingerprint: str | None
    outcome: str  # the kind of the event whose answer is shown ("request": none yet)
    model: str | None
    system: Any  # a string, a list of system blocks, or None
    messages: list[Any]
    answer: str | None  # the text blocks of the answer, joined; None when there is none
    answer_blocks: list[Any]  # every content block of the answer (tool calls included)
    served_from: str | None  # a cache hit: the request whose recorded answer it served
    seqs: tuple[int, ...]  # the events whose content this is
    payloads: dict[str, str]  # name -> digest of each payload read
    access_seq: int | None = None  # the ACCESS event that recorded this read


@dataclass
class ContentRead:
    """The outcome of :func:`recorded_content`: content, or the problems that refuse it."""

    content: RecordedContent | None
    problems: list[str] = field(default_factory=list)
    seqs: tuple[int, ...] = ()
    nothing: str | None = None  # why there is no content to read (not a defect)
    # name -> the bytes each payload read held (the request body restored to its wire form),
    # and the events it was read through: what an export with content carries as evidence.
    raw: dict[str, bytes] = field(default_factory=dict)
    # Each sealed payload's salt (audit.sealing), which an export carries so that the
    # content can be checked offline against the digest its event signed.
    salts: dict[str, bytes] = field(default_factory=dict)
    events: tuple[StoredEvent, ...] = ()


@dataclass
class ContentPlan:
    """What a content read will read, found and checked before anything is read: the
    events (REQUEST, outcome, cache hit), and each payload they name (``to_read``: name ->
    digest, attachments of the request body included), or the problems that refuse it."""

    intent: StoredEvent | None
    outcome: StoredEvent | None
    hit: StoredEvent | None
    served_from: str | None
    problems: list[str]
    seqs: tuple[int, ...]
    nothing: str | None = None
    to_read: dict[str, str] = field(default_factory=dict)

    def refused(self) -> ContentRead | None:
        """The read's outcome when there is nothing to read, or it is refused."""
        if self.nothing is not None or self.problems or self.intent is None:
            return ContentRead(None, self.problems, self.seqs, nothing=self.nothing)
        return None


def content_plan(
    store: AuditStore,
    events: list[StoredEvent],
    *,
    signature: SignatureCheck | None,
    check_payloads: bool = True,
) -> ContentPlan:
    """Find and check the events of the request whose life is ``events`` (seq order), and
    the payloads a read of its content takes, without reading any content: checked for
    being stored and intact through their hashes (:meth:`AuditStore.check_payload`), so a
    role that may read content only against an ACCESS record can record one first.
    ``check_payloads=False`` leaves that check to the read (which makes it anyway)."""
    outcome = next((e for e in reversed(events) if e.kind.value in TERMINAL), None)
    hit = next((e for e in reversed(events) if e.kind == EventKind.CACHE_HIT), None)
    problems: list[str] = []
    served_from = None
    if outcome is None and hit is not None:
        problems += check_event(store, hit, signature)
        outcome, found = _served(store, hit)
        problems += found
        served_from = outcome.request_id if outcome is not None else None
    if outcome is not None:
        problems += check_outcome(store, outcome, signature=signature)
        life = store.events_for_request(outcome.request_id)
        intent = next(
            (
                e
                for e in life
                if e.kind == EventKind.REQUEST
                and e.seq < outcome.seq
                and e.request_hash == outcome.request_hash
            ),
            None,
        )
    else:
        intent = next((e for e in events if e.kind == EventKind.REQUEST), None)
        if intent is not None:
            problems += check_event(store, intent, signature)
    seqs = tuple(sorted({e.seq for e in (intent, outcome, hit) if e is not None}))
    plan = ContentPlan(intent, outcome, hit, served_from, problems, seqs)
    if intent is None and not problems:
        kinds = ", ".join(e.kind.value for e in events)
        plan.nothing = f"nothing was sent (its events: {kinds})"
    if plan.refused() is not None:
        return plan
    assert intent is not None
    reads = [(intent, n) for n in intent.payload_digests if n == "request_body" or _attached(n)]
    if outcome is not None:
        name = next((n for n in ANSWERS if n in outcome.payload_digests), None)
        reads += [(outcome, name)] if name is not None else []
    for event, name in reads:
        ref = event.payload_digests[name]
        try:
            if check_payloads:
                store.check_payload(ref)
        except AuditStoreError as exc:
            problems.append(f"seq {event.seq}: payload {name} is not as recorded ({exc.message})")
        plan.to_read[name] = ref
    return plan


def recorded_content(
    store: AuditStore,
    events: list[StoredEvent],
    *,
    signature: SignatureCheck | None,
    plan: ContentPlan | None = None,
) -> ContentRead:
    """The content of the request whose life is ``events`` (seq order), checked first
    (``plan``: already checked by :func:`content_plan`). A role that may not read content
    itself reads it inside :meth:`AuditStore.reading_under` an ACCESS event naming
    ``plan.to_read``."""
    plan = plan or content_plan(store, events, signature=signature)
    refused = plan.refused()
    if refused is not None:
        return refused
    intent, outcome, hit = plan.intent, plan.outcome, plan.hit
    assert intent is not None
    problems: list[str] = []
    payloads: dict[str, str] = {}
    raw: dict[str, bytes] = {}
    salts: dict[str, bytes] = {}
    sent = _payload(store, intent, "request_body", payloads, raw, problems, salts)
    answer: Any = None
    if outcome is not None:
        name = next((n for n in ANSWERS if n in outcome.payload_digests), None)
        if name is not None:
            answer = _payload(store, outcome, name, payloads, raw, problems, salts)
    if problems:
        return ContentRead(None, problems, plan.seqs)
    content = RecordedContent(
        request_id=events[0].request_id,
        task=events[0].task,
        caller=events[0].caller,
        policy_fingerprint=intent.policy_fingerprint,
        outcome=(hit or outcome or intent).kind.value,
        served_from=plan.served_from,
        seqs=plan.seqs,
        payloads=payloads,
        **shown_parts(sent, answer),
    )
    used = tuple(e for e in (intent, outcome, hit) if e is not None)
    return ContentRead(content, [], plan.seqs, raw=raw, events=used, salts=salts)


def _attached(name: str) -> bool:
    return name.startswith(ATTACHMENT_PREFIX)


def shown_parts(sent: Any, answer: Any) -> dict[str, Any]:
    """What a reader is shown of a request body and an answer (each parsed JSON, text that
    is not JSON, or None): model, system, messages, answer text and blocks. An export's
    verify derives these again from the payloads it carries and compares."""
    body = sent if isinstance(sent, dict) else {}
    blocks = answer.get("content") if isinstance(answer, dict) else None
    blocks = blocks if isinstance(blocks, list) else []
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    if isinstance(answer, str):
        texts = [answer]
    model = answer.get("model") if isinstance(answer, dict) else None
    return {
        "model": model if isinstance(model, str) else _str(body.get("model")),
        "system": body.get("system"),
        "messages": list(body.get("messages") or []),
        "answer": "".join(texts) if texts or answer is not None else None,
        "answer_blocks": blocks,
    }


def _served(store: AuditStore, hit: StoredEvent) -> tuple[StoredEvent | None, list[str]]:
    """The RESPONSE a cache hit names, if it is the one it names."""
    seq = hit.data.get("served_seq")
    if isinstance(seq, bool) or not isinstance(seq, int):
        return None, [f"seq {hit.seq}: the cache hit names no served seq"]
    try:
        served = store.event(seq)
    except AuditStoreError as exc:
        return None, [f"seq {hit.seq}: the answer it served (seq {seq}) is gone ({exc.message})"]
    if served.kind != EventKind.RESPONSE or served.hash != hit.data.get("served_hash"):
        return None, [f"seq {hit.seq}: seq {seq} is not the RESPONSE it says it served"]
    if served.request_hash != hit.request_hash:
        return None, [f"seq {hit.seq}: seq {seq} answered another request hash"]
    return served, []


def _payload(
    store: AuditStore,
    event: StoredEvent,
    name: str,
    read: dict[str, str],
    raw: dict[str, bytes],
    problems: list[str],
    salts: dict[str, bytes],
) -> Any:
    ref = event.payload_digests.get(name)
    if ref is None:
        return None
    try:
        stored = store.stored_payload(ref)
        data = opened(stored) if name != "request_body" else restored(store, event, name)
    except ContentNotPermitted:
        raise  # the database refused the read (an expired window, say): not tampering
    except AuditStoreError as exc:
        problems.append(f"seq {event.seq}: payload {name} is not as recorded ({exc.message})")
        return None
    read[name] = ref
    raw[name] = data
    salt = salt_of(stored)
    if salt is not None:
        salts[name] = salt
    return parsed_payload(data)


def parsed_payload(data: bytes) -> Any:
    """A payload as a reader is shown it: its JSON, or (not JSON: a raw stream, say) the
    text it is, never parsed further."""
    try:
        return bounded_loads(data)
    except UnreadableJSON:
        return data.decode("utf-8", errors="replace")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def selected_by_export(access: StoredEvent, life: Sequence[StoredEvent]) -> bool:
    """Whether a content export (an ACCESS event with ``export``) selected this request: an
    event of it before the export matches the export's filters."""
    export = access.data.get("export")
    if not isinstance(export, dict) or not isinstance(export.get("filters"), dict):
        return False
    try:
        filters = EventFilter.model_validate(export["filters"])
    except ValueError:
        return False
    return any(
        e.seq < access.seq
        and e.kind == EventKind.REQUEST
        and (filters.task is None or e.task == filters.task)
        and (filters.caller is None or e.caller == filters.caller)
        and (filters.since is None or e.recorded_at >= filters.since)
        and (filters.until is None or e.recorded_at < filters.until)
        for e in life
    )
