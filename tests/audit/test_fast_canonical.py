"""The fast canonical form is byte for byte rfc8785's wherever it answers, and it answers for
the values the gateway hashes most (request bodies, event bodies)."""

from __future__ import annotations

import json
import math

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from audit._fast_canonical import fast_canonical
from audit.canonical import canonical_bytes

SAFE = 2**53 - 1
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e17, max_value=1e17),
    st.floats(min_value=-1e-3, max_value=1e-3),
    st.integers(-(2**60), 2**60).map(float),
    st.sampled_from([0.0, -0.0, 1e-4, 9.999e-5, 1e16, 1e16 - 2, 1e21, 5e-7, 0.1, 2.5, 1 / 3]),
)
texts = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
    max_size=8,
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**54), 2**54),
    st.sampled_from([SAFE, -SAFE, SAFE + 1, -SAFE - 1]),
    floats,
    texts,
    st.sampled_from(["\ud800", "a\udfff", "\ue000", "\U0001f600", '"\\\b\f\n\r\t\x00\x1f\x7f']),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(texts, st.sampled_from(["\ue000", "\U0001f600", "a", "b", ""])),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)


def _reference(value: object) -> bytes | None:
    try:
        return bytes(rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        return None


@pytest.mark.slow  # 3,000 generated values
@settings(max_examples=3000, deadline=None)
@given(values)
def test_it_is_rfc8785_byte_for_byte_or_declines(value: object) -> None:
    fast = fast_canonical(value)
    if fast is not None:
        assert fast == _reference(value)


@given(values)
def test_canonical_bytes_is_unchanged(value: object) -> None:
    reference = _reference(value)
    if reference is None:
        return
    assert canonical_bytes(value) == reference


def test_it_answers_for_request_and_event_bodies() -> None:
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 2048,
        "temperature": 0.0,
        "top_p": 0.95,
        "stop_sequences": ["</verdict>"],
        "system": [{"type": "text", "text": 'Rules:\n1. "Quote" \\ and \t tabs. ünïcode ✓ 😀'}],
        "messages": [{"role": "user", "content": "Pay 10 EUR to ACME."}],
        "metadata": {"user_id": "gw-u1-0123"},
    }
    fast = fast_canonical(body)
    assert fast is not None and fast == bytes(rfc8785.dumps(body))
    assert b'"temperature":0,' in fast
    assert fast_canonical({"latency_ms": 12.345, "ok": True, "seq": 7}) == (
        b'{"latency_ms":12.345,"ok":true,"seq":7}'
    )


def test_it_declines_what_json_would_write_differently() -> None:
    for value in (
        {"\ue000": 1, "\U0001f600": 2},  # UTF-16 order differs from code point order
        1e21,
        1e-7,
        9007199254740994.0,
        2**53,
        math.nan,
        "\ud800",
        True.__class__.__mro__,  # not a JSON type
    ):
        assert fast_canonical(value) is None, value
    assert json.loads(canonical_bytes({"\ue000": 1, "\U0001f600": 2})) == {
        "\ue000": 1,
        "\U0001f600": 2,
    }


def test_a_depth_bound_gives_none_only_past_it() -> None:
    # Wide but shallow (a request's 20 tools write more brackets than the bound): kept.
    wide = {"tools": [{"input_schema": {"properties": {"a": {"type": "string"}}}}] * 60}
    assert fast_canonical(wide, 6) == fast_canonical(wide)
    assert fast_canonical(wide, 5) is None
    assert fast_canonical([], 1) == b"[]"
    assert fast_canonical([], 0) is None
    assert fast_canonical("text", 0) == b'"text"'


def test_orjson_answers_only_what_the_walk_would() -> None:
    import enum
    import uuid

    class Colour(enum.Enum):
        RED = 1

    class Text(str):
        pass

    # Written by orjson as JSON, refused or written otherwise by rfc8785: left to the walk.
    for value in (
        {"a": Colour.RED},
        [uuid.UUID(int=1)],
        {"a": [math.nan]},
        {"a": (1, 2)},
        {"a": Text("x")},
        {"a": 1.5},
        {"a": [1.0]},
        {"b": 2**53},
        {"\U0001f600": 1, "\ue000": 2},
    ):
        fast = fast_canonical(value)
        assert fast is None or fast == _reference(value), value
    # A string quoting a float, a float among strings: decided by the parser, not the text.
    for value in ({"a": "v1.5 and 2e3"}, {"a": ["x", 0.5], "b": "y"}, {"e": "0.", "n": 10}):
        fast = fast_canonical(value)
        assert fast is not None and fast == _reference(value), value


def test_the_depth_bound_holds_for_objects_and_arrays_alike() -> None:
    for leaf in (1, [], {}, {"a": 1}, "s"):
        nested: object = leaf
        for level in range(1, 40):
            nested = {"k": nested} if level % 2 else [nested]
            depth = level + (1 if isinstance(leaf, list | dict) else 0)
            assert fast_canonical(nested, depth) == _reference(nested)
            assert fast_canonical(nested, depth - 1) is None


def test_a_float_deep_in_an_object_is_rfc8785_and_keeps_the_depth_bound() -> None:
    # A planned body's temperature beside caller tools, one level down in the request hash's
    # object: the members around it are written by orjson, the float's by the walk.
    tools = [{"name": f"t{n}", "input_schema": {"type": "object", "x": "ü😀"}} for n in range(20)]
    keyed = {"provider": "anthropic", "body": {"temperature": 0.7, "tools": tools, "n": 1.0}}
    assert fast_canonical(keyed) == _reference(keyed)
    assert fast_canonical(keyed, 5) == _reference(keyed)
    assert fast_canonical(keyed, 4) is None  # body, tools, a tool, its schema: 5 levels
    for leaf in (0.5, {"f": 2.5}, [1e-3]):
        nested: object = leaf
        for level in range(1, 30):
            nested = {"k": nested, "f": 0.25} if level % 2 else [nested]
            depth = level + (0 if isinstance(leaf, float) else 1)
            assert fast_canonical(nested, depth) == _reference(nested)
            assert fast_canonical(nested, depth - 1) is None


def test_objects_nested_past_the_recursion_limit_are_left_to_the_reference() -> None:
    nested: object = 0.5
    for _ in range(5000):
        nested = {"k": nested, "f": 1.5}
    assert fast_canonical(nested) is None  # no RecursionError out of it


def test_larger_bytes_seen_before_are_read_back_once_and_still_compared() -> None:
    import orjson

    from audit import _fast_canonical
    from audit.canonical import compact_bytes

    # A framework's tools (more than 4 KB), sent again and again: the parse of orjson's bytes
    # and their scan are remembered by the bytes; the value is compared every time.
    tools = [{"name": f"t{n}", "description": "d" * 300, "x": None} for n in range(20)]
    memo = _fast_canonical._MEMO
    sorted_bytes = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)
    for _ in range(3):
        assert canonical_bytes(tools) == _reference(tools)
        assert compact_bytes(tools) == json.dumps(tools, separators=(",", ":")).encode()
    assert sorted_bytes in memo and orjson.dumps(tools) in memo  # kept once seen twice
    # Bytes seen once (a conversation's messages, new on every turn) are not kept.
    once = [{"role": "user", "content": "q" * 5000}]
    assert compact_bytes(once) == json.dumps(once, separators=(",", ":")).encode()
    assert orjson.dumps(once) not in memo
    # Values orjson writes as the same bytes (NaN as null, a tuple as an array) are not the
    # value remembered: each is decided as it always was.
    nan = [{**tool, "x": math.nan} for tool in tools]
    with pytest.raises(ValueError):
        canonical_bytes(nan)
    assert compact_bytes(nan) == json.dumps(nan, separators=(",", ":")).encode()
    as_tuple = [{**tool, "x": ()} for tool in tools]
    as_list = [{**tool, "x": []} for tool in tools]
    assert canonical_bytes(as_list) == canonical_bytes(as_tuple) == _reference(as_tuple)
    assert len(memo) <= 16


def test_shallow_compact_is_orjsons_bytes_exactly_within_the_depth_bound() -> None:
    import orjson

    from audit.canonical import shallow_compact

    for leaf, own in ((1, 0), ([], 1), ({}, 1), ({"a": [1, "x"]}, 2), ("s", 0)):
        nested: object = leaf
        for level in range(1, 70):
            nested = {"k": nested} if level % 2 else [nested]
            depth = level + own
            assert shallow_compact(nested, depth) == orjson.dumps(nested)
            assert shallow_compact(nested, depth - 1) is None
