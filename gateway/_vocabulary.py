"""What the audit log's event kinds and outcomes mean to the gateway.

    status = ""
    for event in events:                       # one request's events, in seq order
        status = request_status(status, event)  # "completed", "flagged", "incomplete", ...

The audit store stores and proves: it knows the kind names (:class:`audit.EventKind`) and,
to verify a request's life, which kinds end one. What an outcome means to a reader of the
gateway's log (a RESPONSE whose ``ok`` is false is a flagged answer; a request with no
outcome is incomplete) is the gateway's, and is written here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from audit import EventKind, StoredEvent

# The kinds that end a request: each request has at most one of them (verify checks that).
TERMINAL: frozenset[EventKind] = frozenset(
    {EventKind.RESPONSE, EventKind.FAILED, EventKind.CANCELLED}
)

INCOMPLETE = "incomplete"  # a REQUEST with no outcome: the process died or still waits
FLAGGED = "flagged"  # a RESPONSE whose answer failed its output check (data ok = false)

# A request's status in `gateway audit list`, from the kind of its newest event that has one.
STATUS_OF_KIND: Mapping[EventKind, str] = MappingProxyType(
    {
        EventKind.RESPONSE: "completed",
        EventKind.FAILED: "failed",
        EventKind.REJECTED: "rejected",
        EventKind.CACHE_HIT: "cache hit",
        EventKind.REPLAY: "replay",
        EventKind.EXPORT: "export",
        EventKind.CHECKPOINT: "checkpoint",
        EventKind.CANCELLED: "cancelled",
        EventKind.INTEGRITY_ALERT: "integrity alert",
        EventKind.ACCESS: "access",
        EventKind.APPROVAL: "approval",
        EventKind.TOKEN_COUNT: "token count",
        EventKind.CALLER_KEY: "caller key",
        EventKind.CALLER_KEY_REVOKED: "key revoked",
        # After the RESPONSE: the answer was returned, but what it reported about itself
        # differs from what its policy pinned, which an auditor should see in the list.
        EventKind.ANSWER_ALERT: "answer alert",
        # Format 2: a seq whose writer never committed; a request of its own.
        EventKind.VOID: "void",
        EventKind.KEY_ROTATION: "key rotation",
        EventKind.CHECKPOINT_KEY_ROTATION: "checkpoint key rotation",
        EventKind.UNAPPROVED_TASKS: "unapproved tasks",
        EventKind.EVIDENCE_PACK: "evidence pack",
        # A hold is a request of its own (its id, then its release under the same id).
        EventKind.LEGAL_HOLD: "legal hold",
        EventKind.HOLD_RELEASE: "hold released",
        # Alone only if the request's own events are not in the selection.
        EventKind.ERASURE: "erasure",
    }
)


# The records of a reader's own acts (what a PostgreSQL reviewer may append, under any
# request id): they are a request of their own, never a step in another request's life.
READ_RECORDS: frozenset[EventKind] = frozenset(
    {EventKind.EXPORT, EventKind.CHECKPOINT, EventKind.ACCESS, EventKind.EVIDENCE_PACK}
)
# Recorded under the id of the request whose content went: its outcome stays its status.
KEEPS_STATUS: frozenset[EventKind] = frozenset({*READ_RECORDS, EventKind.ERASURE})


def request_status(status: str, event: StoredEvent) -> str:
    """A request's status once ``event`` (its next event in seq order) is read; ``status``
    is the status so far, "" before its first event. A read record under the id of a request
    that has events already leaves its status as it was."""
    if status and event.kind in KEEPS_STATUS:
        return status
    if event.kind == EventKind.RESPONSE and event.data.get("ok") is False:
        return FLAGGED
    return STATUS_OF_KIND.get(event.kind, status or INCOMPLETE)


# What `gateway audit list --status NAME` selects, from a request's folded status and the kinds
# of its events: "alerted" is any request with an ANSWER_ALERT (the answer was returned, but
# did not match its policy), whatever its status says; the others name the status itself
# (a flagged answer that was also alerted shows, and lists, as "answer alert").
LISTED_STATUSES: tuple[str, ...] = (
    "completed",
    FLAGGED,
    "alerted",
    "failed",
    "cancelled",
    "rejected",
    INCOMPLETE,
)


def has_status(name: str, status: str, kinds: tuple[str, ...]) -> bool:
    """Whether a request with ``status`` and events of ``kinds`` is listed under ``name``
    (one of :data:`LISTED_STATUSES`)."""
    if name == "alerted":
        return EventKind.ANSWER_ALERT.value in kinds
    return status == name
