"""A draft may give its policy as canonical bytes instead of content (the gateway computes
them once per policy): the store records exactly what the content would have given, and
refuses bytes that are not a policy's canonical form under the draft's fingerprint, however
often the same bytes were accepted before."""

from __future__ import annotations

from typing import Any

import pytest

from audit import AuditStore, EventDraft, EventKind, InvalidEvent
from audit.canonical import canonical_bytes, digest
from audit.verify import verify_log

CONTENT: dict[str, Any] = {
    "task": "compliance_review",
    "model": {"id": "claude-sonnet-4-6"},
    "generation": {"max_tokens": 2048, "temperature": 0.0, "stop_sequences": ["</v>"]},
    "prompt": {"system": "Grüße ☃ \u2028 review the transaction."},
}
BYTES = canonical_bytes(CONTENT)
FINGERPRINT = digest(BYTES)


def _draft(rid: str, **policy: Any) -> EventDraft:
    policy.setdefault("policy_fingerprint", FINGERPRINT)
    return EventDraft(kind=EventKind.REQUEST, request_id=rid, data={"n": rid}, **policy)


def test_bytes_record_what_the_content_records(sqlite_url: str, tmp_path: Any) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with AuditStore.open(sqlite_url) as by_bytes, AuditStore.open(other) as by_content:
        for rid in ("a", "b"):  # the second append finds the policy row already written
            by_bytes.append(_draft(rid, policy_canonical=BYTES))
            by_content.append(_draft(rid, policy_content=CONTENT))
        assert by_bytes.policy_content(FINGERPRINT) == CONTENT
        shown = [(e.policy_fingerprint, e.data, e.payload_digests) for e in by_bytes.iter_events()]
        assert shown == [
            (e.policy_fingerprint, e.data, e.payload_digests) for e in by_content.iter_events()
        ]
        # The event body references the policy alike (only ids and times differ).
        assert [b"policy" in e.body for e in by_bytes.iter_events()] == [True, True]
        assert verify_log(by_bytes).ok


BAD: dict[str, tuple[bytes, str, str]] = {
    # {"x": True} == {"x": 1} in Python; as bytes they are two policies.
    "true for 1": (b'{"x":true}', digest(b'{"x":1}'), "policy_fingerprint"),
    "not canonical": (b'{ "x": 1 }', digest(b'{ "x": 1 }'), "canonical"),
    "unsorted keys": (b'{"b":1,"a":2}', digest(b'{"b":1,"a":2}'), "canonical"),
    "not JSON": (b'{"x":', digest(b'{"x":'), "not readable JSON"),
    "not an object": (b"[1,2]", digest(b"[1,2]"), "not a JSON object"),
    "NUL": (b'{"x":"a\\u0000b"}', digest(b'{"x":"a\\u0000b"}'), "NUL"),
    "too deep": (b'{"x":' + b"[" * 200 + b"]" * 200 + b"}", "sha256:" + "0" * 64, "nested"),
    "another fingerprint": (BYTES, digest(b"{}"), "policy_fingerprint"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bytes_that_are_not_the_policy_are_refused(sqlite_url: str, case: str) -> None:
    given, fingerprint, message = BAD[case]
    with AuditStore.open(sqlite_url) as store:
        store.append(_draft("ok", policy_canonical=BYTES))  # accepted bytes, memoised
        with pytest.raises(InvalidEvent, match=message):
            store.append(_draft("bad", policy_canonical=given, policy_fingerprint=fingerprint))
        assert [e.request_id for e in store.iter_events()] == ["ok"]


def test_content_and_bytes_together_are_refused(sqlite_url: str) -> None:
    with AuditStore.open(sqlite_url) as store, pytest.raises(InvalidEvent, match="both"):
        # Telling whether the two agree would cost the canonicalisation the bytes save.
        store.append(_draft("both", policy_content=CONTENT, policy_canonical=BYTES))


def test_a_caller_buffer_changed_after_the_check_does_not_change_the_stored_policy() -> None:
    from audit.store._prepare import prepare

    buffer = bytearray(BYTES)
    # model_construct skips validation, which would have made it bytes: any caller can.
    draft = EventDraft.model_construct(
        kind=EventKind.REQUEST,
        request_id="r",
        data={},
        payloads={},
        policy_fingerprint=FINGERPRINT,
        policy_content=None,
        policy_canonical=buffer,
    )
    prepared = prepare(draft)
    buffer[:] = b"{}" + b" " * (len(BYTES) - 2)
    assert prepared.policy_row is not None
    assert type(prepared.policy_row["content"]) is bytes
    assert prepared.policy_row["content"] == BYTES
