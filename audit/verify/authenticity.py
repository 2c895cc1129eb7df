"""Is one recorded event what it claims to be? The read path's check, before an event is used.

    problems = check_outcome(store, event)     # [] when the event checks out
    if problems: ...refuse to serve it...

``audit verify`` walks the whole log; a gateway about to serve a recorded answer cannot wait
for that, and must not trust columns either (an edited ``request_hash`` column would point a
lookup at another request's answer). So this checks, for one outcome event:

- its own hash (``sha256(prev_hash || body)``) and its link to the event before it;
- that the searchable columns agree with the hashed body, and the body names this seq;
- that the writing gateway's signature checks out under a trusted key (when keys are given),
  and that its key was not retired by a key rotation at or before its seq (audit.verify.eras);
- that a REQUEST with the same request id and request hash comes before it, itself intact,
  and that the request had not already ended (a second RESPONSE is a forgery's tell);
- that every payload it references is stored and hashes to its digest.

A forged row that is well linked at the head of the chain passes the first two; the
signature and the preceding REQUEST are what a database writer without the record key
cannot fake. Each problem is one line naming the seq and what failed.
"""

from __future__ import annotations

from audit.errors import AuditStoreError
from audit.store import AuditStore
from audit.store.chain import MIRRORED, link_hash
from audit.store.models import EventKind, StoredEvent
from audit.store.signing import SignatureCheck, signature_check
from audit.verify.body import parse_body
from audit.verify.eras import KeyEras
from audit.verify.lifecycle import TERMINAL

__all__ = ["SignatureCheck", "check_event", "check_outcome", "signature_check"]


def check_event(
    store: AuditStore,
    event: StoredEvent,
    signature: SignatureCheck | None,
    eras: KeyEras | None = None,
) -> list[str]:
    """The event's own integrity: hash, link, column/body agreement, signature, and its
    signer's era (``eras``: the log's key rotations, read here when not given)."""
    seq = event.seq
    problems: list[str] = []
    if link_hash(event.prev_hash, event.body) != event.hash:
        problems.append(f"seq {seq}: its hash does not match its body")
    if store.link_of(event) != event.prev_hash:
        problems.append(f"seq {seq}: it does not link to the event before it")
    parsed = parse_body(event.body)
    if isinstance(parsed, str):
        problems.append(f"seq {seq}: its body is not an event body ({parsed})")
    else:
        wrong = [c for c in MIRRORED if _column(event, c) != parsed.get(c)]
        if parsed.get("seq") != seq:
            wrong.append("seq")
        if wrong:
            problems.append(f"seq {seq}: column(s) {', '.join(wrong)} differ from its body")
    if signature is not None:
        reason = signature(event)
        if reason is None:
            reason = (eras or KeyEras.read(store, signature)).problem(event)
        if reason is not None:
            problems.append(f"seq {seq}: {reason}")
    return problems


def check_outcome(
    store: AuditStore, event: StoredEvent, *, signature: SignatureCheck | None = None
) -> list[str]:
    """:func:`check_event` for an outcome, plus its preceding REQUEST and its payloads."""
    eras = KeyEras.read(store, signature) if signature is not None else None
    problems = check_event(store, event, signature, eras)
    life = [
        e
        for e in store.events_for_request(event.request_id)
        if e.seq < event.seq and e.request_hash == event.request_hash
    ]
    intent = next((e for e in life if e.kind == EventKind.REQUEST), None)
    if intent is None:
        problems.append(
            f"seq {event.seq}: no REQUEST with its request id and request hash comes before it"
        )
    else:
        problems.extend(check_event(store, intent, signature, eras))
        ended = next((e for e in life if e.seq > intent.seq and e.kind.value in TERMINAL), None)
        if ended is not None:
            # That earlier outcome decides only once it is known to be the gateway's own: a
            # forged one is named as what does not check out, not taken as the request's end.
            problems.extend(
                check_event(store, ended, signature, eras)
                or [
                    f"seq {event.seq}: its request already ended at seq {ended.seq} "
                    f"({ended.kind.value}), so it is a second outcome"
                ]
            )
    for name, ref in sorted(event.payload_digests.items()):
        try:
            store.check_payload(ref)
        except AuditStoreError as exc:
            problems.append(f"seq {event.seq}: payload {name} is not as recorded ({exc.message})")
    return problems


def _column(event: StoredEvent, name: str) -> object:
    value = getattr(event, name)
    return value.value if isinstance(value, EventKind) else value
