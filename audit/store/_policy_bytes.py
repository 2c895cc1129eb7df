"""Policy content handed to the store as its canonical bytes, checked once per distinct value.

    EventDraft(..., policy_fingerprint=fp, policy_canonical=policy_bytes)
    checked_policy_bytes(draft)        # the bytes, once shown canonical and hashing to fp

A REQUEST carries the policy that governed it. Canonicalising that content on every append
costs tens of microseconds for a policy that never changes, and no cheaper key than the
canonical bytes identifies the content soundly (``{"x": True}`` and ``{"x": 1}`` are equal
and hash alike in Python). So a caller that holds the canonical bytes (the gateway computes
them once per policy) passes them instead of the content, and the store checks what it
would otherwise have produced: the bytes are JSON within the reader's limits, an object, the
RFC 8785 form of what they parse to (so they are the bytes ``canonical_bytes`` would write),
free of NUL, and their digest is the draft's fingerprint. A pure function of the bytes, so
it is memoised on the bytes themselves: equal bytes are the same content.

Anyone may build a draft, so a draft gives the content one way or the other, never both: two
forms that might disagree would need the canonicalisation this saves to tell.
"""

from __future__ import annotations

from functools import lru_cache

from audit.canonical import CanonicalizationError, canonical_bytes, digest
from audit.errors import InvalidEvent
from audit.store.bounded import MAX_DEPTH, UnreadableJSON, check_draft, loads
from audit.store.models import EventDraft, EventKind

__all__ = ["checked_policy_bytes"]

_HINT = "Pass the policy's canonical bytes (canonical_bytes(policy.content())) and its fingerprint."


def checked_policy_bytes(draft: EventDraft) -> bytes | None:
    """``draft.policy_canonical`` once shown to be a policy's canonical form with the draft's
    fingerprint (None when the draft gives none); :class:`InvalidEvent` otherwise."""
    given = draft.policy_canonical
    if given is None:
        return None
    if draft.policy_content is not None:
        raise InvalidEvent(
            "the draft gives the policy both as content and as canonical bytes.",
            hint="Pass one of policy_content and policy_canonical.",
        )
    # An immutable copy, checked and stored: a draft built without validation may hold a
    # caller's bytearray, which could change between this check and the commit.
    given = bytes(given) if type(given) is not bytes else given
    if _digest_of_policy(given) != draft.policy_fingerprint:
        raise InvalidEvent(
            "the policy content does not hash to the event's policy_fingerprint.", hint=_HINT
        )
    return given


@lru_cache(maxsize=256)
def _digest_of_policy(given: bytes) -> str:
    try:
        content = loads(given, max_depth=MAX_DEPTH)
    except UnreadableJSON as exc:
        raise InvalidEvent(f"the policy's canonical bytes are not readable JSON: {exc}.") from None
    if not isinstance(content, dict):
        raise InvalidEvent("the policy's canonical bytes are not a JSON object.", hint=_HINT)
    # NUL and depth, as for content given as a dict (the same walk, the same messages).
    check_draft(EventDraft(kind=EventKind.REQUEST, request_id="-", policy_content=content))
    try:
        canonical = canonical_bytes(content)
    except CanonicalizationError as exc:
        raise InvalidEvent(f"the policy content cannot be recorded: {exc}.") from None
    if canonical != given:
        raise InvalidEvent("the policy's bytes are not its canonical (RFC 8785) form.", hint=_HINT)
    return digest(given)
