"""The append path reads the bounds (NUL, depth) off the canonical bytes it makes anyway, and
falls back to the full walk (``check_draft``) whenever the bytes do not settle it. Whatever
the route, a draft is refused exactly when, and with the message with which, the full check
refuses it; and a draft it accepts is prepared with the same body as before."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import EventDraft, EventKind, InvalidEvent
from audit.canonical import CanonicalizationError, canonical_bytes, digest
from audit.store._prepare import prepare
from audit.store.bounded import MAX_DATA_DEPTH, MAX_DEPTH, check_draft
from audit.store.chain import BodyTemplate


class Text(str):
    """A str subclass: the fast canonical path declines it, the walk still reads it."""


def _nested(levels: int, leaf: Any = 1) -> Any:
    """``leaf`` inside ``levels`` lists."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def _draft(data: Any = None, policy: Any = None, **fields: Any) -> EventDraft:
    extra: dict[str, Any] = {}
    if policy is not None:
        try:
            extra["policy_fingerprint"] = digest(canonical_bytes(policy))
        except (CanonicalizationError, RecursionError):
            extra["policy_fingerprint"] = "sha256:" + "0" * 64
        extra["policy_content"] = policy
    return EventDraft.model_construct(  # as a caller's draft may be: only the store checks
        kind=EventKind.REQUEST,
        request_id="r1",
        task=fields.get("task"),
        caller=fields.get("caller"),
        policy_fingerprint=extra.get("policy_fingerprint"),
        request_hash=None,
        data=data if data is not None else {},
        payloads=fields.get("payloads", {}),
        policy_content=extra.get("policy_content"),
    )


def _reference(draft: EventDraft) -> str | None:
    """What the append path did before the screen: the walk, then the canonical bytes."""
    try:
        check_draft(draft)
    except InvalidEvent as exc:
        return str(exc)
    return None


def _outcome(draft: EventDraft) -> str | None:
    try:
        prepare(draft)
    except InvalidEvent as exc:
        return str(exc)
    return None


CASES: dict[str, EventDraft] = {
    "NUL in data": _draft({"a": "x\x00"}),
    "NUL in a data key": _draft({"k\x00": 1}),
    "NUL in policy content": _draft(policy={"prompt": "x\x00"}),
    "NUL in a policy key": _draft(policy={"p\x00": True}),
    "NUL in a str subclass (declined by the fast path)": _draft({"a": Text("x\x00")}),
    "NUL in policy content and in data": _draft({"a": "\x00"}, policy={"b": "\x00"}),
    "data one level too deep": _draft({"a": _nested(MAX_DATA_DEPTH)}),
    "policy one level too deep": _draft(policy={"a": _nested(MAX_DEPTH)}),
    "policy far too deep (past the recursion limit)": _draft(policy={"a": _nested(5000)}),
    "NUL in the caller column": _draft(caller="svc\x00"),
    "NUL in a payload name": _draft(payloads={"b\x00": b"x"}),
}

ACCEPTED: dict[str, EventDraft] = {
    "data at the depth limit": _draft({"a": _nested(MAX_DATA_DEPTH - 1)}),
    "policy at the depth limit": _draft(policy={"a": _nested(MAX_DEPTH - 1)}),
    # More brackets than the limit, none of them nesting: the screen sends it to the walk.
    "many shallow lists": _draft({"a": [[1]] * (MAX_DATA_DEPTH + 5)}),
    "brackets inside strings": _draft({"a": "[" * 300}, policy={"p": "{" * 300}),
    # The characters \\u0000, not NUL: the screen is unsure, the walk accepts.
    "a backslash before u0000": _draft({"a": "\\u0000"}, policy={"p": "\\u0000"}),
    "a str subclass without NUL": _draft({"a": Text("x")}),
}


@pytest.mark.parametrize("case", CASES)
def test_a_draft_the_walk_refuses_is_refused_with_its_message(case: str) -> None:
    draft = CASES[case]
    expected = _reference(draft)
    assert expected is not None
    assert _outcome(draft) == expected


@pytest.mark.parametrize("case", ACCEPTED)
def test_a_draft_the_walk_accepts_is_prepared(case: str) -> None:
    draft = ACCEPTED[case]
    assert _reference(draft) is None
    prepared = prepare(draft)
    expected = BodyTemplate.of(
        event_id=prepared.event_id,
        request_id=draft.request_id,
        kind=draft.kind.value,
        task=draft.task,
        caller=draft.caller,
        policy_fingerprint=draft.policy_fingerprint,
        request_hash=draft.request_hash,
        data=canonical_bytes(draft.data),
        payloads=prepared.payload_digests,
        policy_ref=prepared.policy_ref,
    )
    assert prepared.body == expected
    if draft.policy_content is not None:
        assert prepared.policy_row is not None
        assert prepared.policy_row["content"] == canonical_bytes(draft.policy_content)


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.sampled_from(["a", "\x00", "\\", "u", "0", "[", "{", '"']), max_size=7),
)
trees = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "\x00", "\\u0000"]), inner, max_size=3),
    ),
    max_leaves=12,
)


@pytest.mark.slow  # 1,500 generated events
@settings(max_examples=1500, deadline=None)
@given(trees, trees, st.integers(0, 3))
def test_the_screen_agrees_with_the_walk(data: Any, policy: Any, depth: int) -> None:
    # Wrapped so that some values sit right at the limits.
    draft = _draft(
        {"v": _nested(MAX_DATA_DEPTH - 2 - depth, data)},
        policy={"v": _nested(MAX_DEPTH - 2 - depth, policy)},
    )
    expected = _reference(draft)
    if expected is None:
        assert _outcome(draft) is None
    else:
        assert _outcome(draft) == expected
