"""The server's body parse gives exactly json's value, whichever parser answered (orjson for
a small body, json with the duplicate-key hook otherwise), and json's verdicts."""

from __future__ import annotations

import json
import math

import pytest

from gateway.server._body import BodyError, parse_json_body

SAME_AS_JSON = [
    b'{"a": 123456789012345678901234567890, "b": -9223372036854775809}',  # past 64 bits
    b'{"a": 18446744073709551615, "b": [1.5, 1e-7, 5e-324, -0, 1E5]}',
    b'{"a": "\\u00e9\\ud83d\\ude00 \\"q\\" \\\\", "b": null, "c": true}',
    b'{"a": 1e400, "b": -Infinity}',  # json reads these; orjson refuses: json decides
    b'{"tools": [{"name": "t", "input_schema": {"type": "object"}}], "max_tokens": 5}',
    # Compact, as the SDKs send (orjson writes some of these back byte for byte: no scan).
    b'{"a":123456789012345678901234567890,"b":-9223372036854775809,"c":18446744073709551615}',
    b'{"a":[1.5,1e-7,5e-324,-0,1E5,1e16,1.0,0.1,-0.0]}',
    '{"a":"\\u00e9 \\u001f\\n \u00e9 \u2028 \U0001f600 / \\\\","b":null,"c":true}'.encode(),
    b'{"tools":[{"name":"t","input_schema":{"type":"object"}}],"max_tokens":5,"t":0.7}',
]


@pytest.mark.parametrize("text", SAME_AS_JSON)
def test_the_value_is_json_s(text: bytes) -> None:
    parsed = parse_json_body(text)
    assert repr(parsed) == repr(json.loads(text))


def test_nan_is_read_as_json_reads_it() -> None:
    assert math.isnan(parse_json_body(b'{"a": NaN}')["a"])


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1, "a": 2}',
        b'{"x": [{"k": 1, "k": 1}]}',
        b'[{"": 0, "": 0}]',
        b'{"a":1,"a":1}',  # compact: what orjson writes back is shorter, so the scan decides
        b'{"m":[{"role":"user","content":"x","content":"x"}],"max_tokens":5}',
    ],
)
def test_a_key_named_twice_is_refused_by_either_path(text: bytes) -> None:
    with pytest.raises(BodyError, match="more than once"):
        parse_json_body(text)


def test_depth_is_bounded_exactly() -> None:
    assert parse_json_body(b"[" * 64 + b"]" * 64) is not None
    with pytest.raises(BodyError, match="levels deep"):
        parse_json_body(b"[" * 65 + b"]" * 65)
    wide = json.dumps({"tools": [{"a": {"b": {"c": [1]}}}] * 40}).encode()
    assert parse_json_body(wide, max_depth=6) == json.loads(wide)
    with pytest.raises(BodyError, match="levels deep"):
        parse_json_body(wide, max_depth=5)
