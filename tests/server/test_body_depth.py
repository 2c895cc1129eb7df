"""The body's depth bound counts arrays and objects, not brackets: brackets inside strings or a
wide body (a framework's 20 tools write hundreds) are not depth."""

from __future__ import annotations

import json

import pytest

from gateway.server._body import MAX_JSON_DEPTH, BodyError, parse_json_body


def test_brackets_in_text_and_a_wide_body_are_not_depth() -> None:
    assert parse_json_body(json.dumps("[{" * 200).encode()) == "[{" * 200
    wide = {"tools": [{"input_schema": {"properties": {"a": {"type": "string"}}}}] * 100}
    assert parse_json_body(json.dumps(wide).encode()) == wide


def test_the_depth_bound_holds_for_arrays_and_objects() -> None:
    at_bound = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert parse_json_body(at_bound) is not None
    for past in (
        b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
        b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1),
        b'[{"a":' * 40 + b"1" + b"}]" * 40,
    ):
        with pytest.raises(BodyError, match="nests more than"):
            parse_json_body(past)
