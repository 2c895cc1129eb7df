"""The content of an export (``--with-content``), checked offline against its signed events.

    evidence = content_evidence(found)        # export: what a content item carries to be checked
    checks = ContentChecks(declared, event=..., defect=...)
    checks.row(line, record)                  # verify: each exported record, in file order
    checks.checked, checks.expected

A content item is what a reviewer reads (system prompt, messages, answer); on its own it is
unsigned text anyone could edit. So it carries its ``evidence``: the signed records of the
events it was read through (the REQUEST, its outcome, a cache hit) and each payload those
events name by digest (the request body as sent, the answer), byte for byte. Verify checks
each evidence record as it checks any exported record (hash, columns, record signature),
that each payload hashes to the digest its signed event names, that every content payload
those events name is there, that the events are this request's (or, for a cache hit, the
request it served), and that what is shown is what the payloads say
(:func:`gateway.evidence._audit_content.shown_parts`). Whether the export holds content is
in its signed EXPORT event (``with_content``), so content removed from a request, or added to
another event, is a defect too.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable
from typing import Any

from audit import AuditStore, EventDraft, EventKind, StoredEvent
from audit.canonical import digest
from audit.reports.export import Annotate
from audit.sealing import SALT_BYTES, seal
from audit.store.erasure import erasures_of
from audit.verify.authenticity import SignatureCheck, check_event
from audit.verify.lifecycle import TERMINAL
from gateway._attachment_payloads import stored_payloads
from gateway.evidence._audit_content import (
    PARTS,
    ContentPlan,
    ContentRead,
    content_plan,
    parsed_payload,
    recorded_content,
    shown_parts,
)

EVIDENCE_KEY = "evidence"
CONTENT_KEY = "content"
# The payloads a content item shows (an evidence event naming one must have it carried).
SHOWN_PAYLOADS = ("request_body", "response_body", "partial_response")
ANSWERS = ("response_body", "partial_response")
OUTCOMES = frozenset({*TERMINAL, "cache_hit"})  # the events a content item's answer comes from

Report = Callable[[int, int | None, str, str], None]  # line, seq, kind, detail
# Check one signed record (line, record, what): its parsed body, {} if unreadable.
CheckEvent = Callable[[int, dict[str, Any], str], dict[str, Any]]


def content_annotator(
    store: AuditStore,
    check: SignatureCheck | None,
    *,
    reviewer: str | None = None,
    export_seq: int | None = None,
) -> Annotate:
    """An export's annotation of each REQUEST with its content, each checked as a content
    read checks it (a record that does not check out is written as ``{"refused": [...]}``,
    never shown), with the evidence it is checked by offline.

    A role that may not read content itself (a PostgreSQL reviewer, migration 0015) records
    an ACCESS event per request first, naming the payloads it reads and the export's own
    ACCESS event (``export_seq``), and reads them under it."""

    def annotate(event: StoredEvent) -> dict[str, Any] | None:
        if event.kind != EventKind.REQUEST:
            return None
        events = store.events_for_request(event.request_id)
        # A role that reads content itself checks it as it reads (once, not twice).
        direct = store.reads_content_directly
        plan = content_plan(store, events, signature=check, check_payloads=not direct)
        if plan.refused() is None and not direct:
            access = store.append(item_access(events, plan, reviewer, export_seq))
            with AuditStore.reading_under(access.seq):
                found = recorded_content(store, events, signature=check, plan=plan)
        else:
            found = recorded_content(store, events, signature=check, plan=plan)
        erased = erasure_evidence(store, events, check) if found.content is None else None
        if erased is not None:
            return {CONTENT_KEY: {"erased": erased}}
        if found.content is None:
            refused = found.problems or [found.nothing or "nothing was sent"]
            return {CONTENT_KEY: {"refused": refused}}
        shown = found.content.model_dump(
            mode="json", exclude={"seqs", "payloads", "access_seq", "request_id"}
        )
        return {CONTENT_KEY: {**shown, EVIDENCE_KEY: content_evidence(found)}}

    return annotate


def item_access(
    events: list[StoredEvent], plan: ContentPlan, reviewer: str | None, export_seq: int | None
) -> EventDraft:
    """The ACCESS event of one request's content read by a content export."""
    return EventDraft(
        kind=EventKind.ACCESS,
        request_id=f"access-{uuid.uuid4().hex}",
        task=events[0].task,
        caller=reviewer,
        data={
            "reviewer": reviewer,
            "read_request_id": events[0].request_id,
            "read": list(PARTS),
            "seqs": list(plan.seqs),
            "shown": True,
            "payloads": plan.to_read,
            "export_access_seq": export_seq,
        },
    )


def erasure_evidence(
    store: AuditStore, events: list[StoredEvent], check: SignatureCheck | None
) -> dict[str, Any] | None:
    """For a request whose content (or, a cache hit, the answer it served) was erased: the
    erasure event, signed, that says so; None when there is none that checks out."""
    owners = {e.request_id for e in events}
    for e in events:
        served = e.data.get("served_seq")
        if e.kind is EventKind.CACHE_HIT and isinstance(served, int):
            owners.add(store.event(served).request_id)
    for erasure in sorted(erasures_of(store, owners).values(), key=lambda e: e.seq):
        if not check_event(store, erasure, check):
            item = {"seq": erasure.seq, EVIDENCE_KEY: {"events": [erasure.export_row(signed=True)]}}
            if erasure.request_id != events[0].request_id:
                item["served_from"] = erasure.request_id  # a cache hit of an erased answer
            return item
    return None


def content_evidence(found: ContentRead) -> dict[str, Any]:
    """What an exported content item carries so that it can be checked offline."""
    payloads: dict[str, dict[str, str]] = {}
    assert found.content is not None
    for name, data in found.raw.items():
        ref = found.content.payloads[name]
        try:
            payloads[name] = {"digest": ref, "text": data.decode("utf-8")}
        except UnicodeDecodeError:
            payloads[name] = {"digest": ref, "base64": base64.b64encode(data).decode("ascii")}
        salt = found.salts.get(name)
        if salt is not None:  # sealed (audit.sealing): the digest covers the salt too
            payloads[name]["salt"] = salt.hex()
    events = [e.export_row(signed=True) for e in found.events]
    return {"events": events, "payloads": payloads}


class ContentChecks:
    def __init__(
        self, declared: bool, *, event: CheckEvent, defect: Report, reported: Callable[[], int]
    ) -> None:
        self.declared = declared  # the signed EXPORT event says the export holds content
        self._event = event
        self._defect = defect
        self._reported = reported  # how many defects the walk has found so far
        self.expected = 0  # REQUEST records that must carry content
        self.checked = 0  # content items that check out
        self._request = ""  # the request whose record is being checked, named in its defects
        # Request id -> (line, seq) of: each checked item shown without an outcome event, and
        # the last outcome the export holds; an item may not leave out an answer it holds.
        self._unanswered: dict[str, tuple[int, int | None]] = {}
        self._outcomes: dict[str, int | None] = {}

    def _bad(self, line: int, seq: int | None, kind: str, detail: str) -> None:
        self._defect(line, seq, kind, f"request {self._request}: {detail}")

    def row(self, line: int, record: dict[str, Any]) -> None:
        seq = record.get("seq") if isinstance(record.get("seq"), int) else None
        kind = record.get("kind")
        content = record.get(CONTENT_KEY)
        self._request = str(record.get("request_id"))
        if kind in OUTCOMES:
            self._outcomes[self._request] = seq
        if kind == "request" and self.declared:
            self.expected += 1
            if content is None:
                self._bad(line, seq, "content_missing", "the export holds content, not this one's")
                return
        if content is None:
            return
        if kind != "request":
            self._bad(line, seq, "content_extra", f"content on a {kind} event")
        elif not self.declared:
            self._bad(
                line, seq, "content_extra", "content in an export whose EXPORT event declares none"
            )
        elif self._item(line, seq, record, content):
            self.checked += 1

    def _item(self, line: int, seq: int | None, record: dict[str, Any], content: Any) -> bool:
        """One content item; True if it checks out (each problem is reported)."""
        rid = record.get("request_id")
        if not isinstance(content, dict):
            self._bad(line, seq, "content_mismatch", "its content is not a JSON object")
            return False
        if "erased" in content:
            return self._erased(line, seq, content["erased"])
        if "refused" in content:
            self._bad(
                line, seq, "content_refused",
                f"the exporting gateway refused its content: {content['refused']}",
            )  # fmt: skip
            return False
        evidence = content.get(EVIDENCE_KEY)
        events = evidence.get("events") if isinstance(evidence, dict) else None
        carried = evidence.get("payloads") if isinstance(evidence, dict) else None
        if not isinstance(events, list) or not events or not isinstance(carried, dict):
            self._bad(
                line, seq, "content_unverifiable",
                "its content carries no evidence (signed events and payloads) to check it by",
            )  # fmt: skip
            return False
        ok = True
        bodies: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (record, parsed body)
        for found in events:
            if not isinstance(found, dict):
                self._bad(line, seq, "content_mismatch", "an evidence event is not an object")
                return False
            what = f"request {rid}: content evidence (seq {found.get('seq')}): "
            before = self._reported()
            parsed = self._event(line, found, what)
            if not parsed or self._reported() != before:
                ok = False
            bodies.append((found, parsed))
        if not ok:
            return False
        ids = {r.get("request_id") for r, _ in bodies}
        served = content.get("served_from")
        if rid not in ids or not ids <= {rid, served}:
            self._bad(
                line, seq, "content_mismatch",
                f"its content is another request's ({', '.join(sorted(map(str, ids - {rid})))})",
            )  # fmt: skip
            return False
        data = self._payloads(line, seq, bodies, carried)
        if data is None:
            return False
        if not any(r.get("kind") in OUTCOMES for r, _ in bodies):
            self._unanswered[str(rid)] = (line, seq)
        return self._shown(line, seq, record, content, bodies, data)

    def _erased(self, line: int, seq: int | None, erased: Any) -> bool:
        """Content erased by policy: the item carries the signed erasure event that says so,
        checked as any exported record, of this request."""
        evidence = erased.get(EVIDENCE_KEY) if isinstance(erased, dict) else None
        events = evidence.get("events") if isinstance(evidence, dict) else None
        if not isinstance(events, list) or len(events) != 1 or not isinstance(events[0], dict):
            self._bad(line, seq, "content_unverifiable", "erased, with no erasure event to show it")
            return False
        record = events[0]
        before = self._reported()
        parsed = self._event(line, record, f"request {self._request}: erasure evidence: ")
        if not parsed or self._reported() != before:
            return False
        owner = erased.get("served_from") or self._request
        if (
            record.get("kind") != "erasure"
            or record.get("seq") != erased.get("seq")
            or record.get("request_id") != owner
        ):
            self._bad(line, seq, "content_mismatch", "its erasure evidence is not an erasure")
            return False
        return True

    def finish(self) -> None:
        """After the last record: an item shown without an answer whose request has an
        outcome in the export left that answer out."""
        for rid, (line, seq) in self._unanswered.items():
            if rid in self._outcomes:
                self._request = rid
                self.checked -= 1
                self._bad(
                    line, seq, "content_missing",
                    f"its content leaves out the outcome the export holds (seq "
                    f"{self._outcomes[rid]})",
                )  # fmt: skip

    def _payloads(
        self,
        line: int,
        seq: int | None,
        bodies: list[tuple[dict[str, Any], dict[str, Any]]],
        carried: dict[str, Any],
    ) -> dict[str, bytes] | None:
        """Each carried payload, checked against the digest its signed event names; every
        shown payload the events name must be carried."""
        named: dict[str, tuple[str, Any]] = {}  # name -> (digest, seq of the event naming it)
        for found, parsed in bodies:
            refs = parsed.get("payloads")
            for name, ref in (refs if isinstance(refs, dict) else {}).items():
                if name in SHOWN_PAYLOADS:
                    named[name] = (str(ref), found.get("seq"))
        data: dict[str, bytes] = {}
        for name in sorted(set(named) | set(carried)):
            if name not in named:
                self._bad(
                    line, seq, "content_extra", f"payload {name} is named by none of its events"
                )
                return None
            ref, where = named[name]
            item = carried.get(name)
            raw = _bytes(item)
            if raw is None:
                self._bad(
                    line, seq, "content_missing",
                    f"payload {name} (named by seq {where}) is not in the export",
                )  # fmt: skip
                return None
            if not _matches(name, raw, ref, _salt(item)):
                self._bad(
                    line, seq, "content_mismatch",
                    f"payload {name} does not hash to the digest seq {where} signed ({ref})",
                )  # fmt: skip
                return None
            data[name] = raw
        return data

    def _shown(
        self,
        line: int,
        seq: int | None,
        record: dict[str, Any],
        content: dict[str, Any],
        bodies: list[tuple[dict[str, Any], dict[str, Any]]],
        data: dict[str, bytes],
    ) -> bool:
        """What the item shows is what its checked payloads and events say."""
        sent = parsed_payload(data["request_body"]) if "request_body" in data else None
        answer_name = next((n for n in ANSWERS if n in data), None)
        answer = parsed_payload(data[answer_name]) if answer_name else None
        intent = next((r for r, _ in bodies if r.get("kind") == "request"), {})
        expected = {
            **shown_parts(sent, answer),
            "task": record.get("task"),
            "caller": record.get("caller"),
            "policy_fingerprint": intent.get("policy_fingerprint"),
        }
        wrong = [k for k, v in expected.items() if content.get(k) != v]
        if content.get("outcome") not in {r.get("kind") for r, _ in bodies}:
            wrong.append("outcome")
        if wrong:
            self._bad(
                line, seq, "content_mismatch",
                f"its shown {', '.join(wrong)} differ(s) from the signed record",
            )  # fmt: skip
            return False
        return True


def _bytes(item: Any) -> bytes | None:
    if not isinstance(item, dict):
        return None
    text = item.get("text")
    if isinstance(text, str):
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: not text any payload held
            return None
    encoded = item.get("base64")
    if isinstance(encoded, str):
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def _salt(item: Any) -> bytes | None:
    text = item.get("salt") if isinstance(item, dict) else None
    if not isinstance(text, str):
        return None
    try:
        salt = bytes.fromhex(text)
    except ValueError:
        return None
    return salt if len(salt) == SALT_BYTES else None


def _matches(name: str, raw: bytes, ref: str, salt: bytes | None) -> bool:
    """Whether ``raw`` is the payload whose digest ``ref`` an event signed: the bytes
    themselves, or (a request body with attachments) the body as the log stores it; sealed
    under ``salt`` when the export carries one."""
    forms = [raw]
    if name == "request_body":
        forms.append(stored_payloads(name, raw)[name])
    return any(digest(seal(f, salt) if salt is not None else f) == ref for f in forms)
