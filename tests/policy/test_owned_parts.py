"""The plan's copy of a caller's parts is exactly what the caller sent: same values and same
types (an integer stays an integer at any size, a float keeps its bits), since the request
hash and the REQUEST are made from it."""

from __future__ import annotations

import json
from typing import Any

import orjson

from gateway.policy._owned_parts import bytes_over
from gateway.policy._owned_parts import owned as _owned


def test_the_copy_keeps_every_value_and_type() -> None:
    parts: dict[str, Any] = {
        "tools": [
            {
                "name": "t",
                "input_schema": {
                    "maximum": 2**70,
                    "minimum": -(2**63),
                    "multipleOf": 0.1 + 0.2,
                    "enum": [5e-324, -0.0, 1e300, 2**63 - 1, True, None, "ü\u2028"],
                },
            }
        ],
        "system": "digits 1234567890123456789 in text",
    }
    owned, size = _owned(parts)
    assert repr(owned) == repr(parts)
    assert owned["tools"] is not parts["tools"]
    assert size > 0


def test_a_parts_size_is_json_s_exactly_at_its_bound() -> None:
    # Floats orjson spells a byte shorter than json ("1e-7" for "1e-07"): the bound is json's.
    part: list[Any] = [{"name": "t", "input_schema": {"enum": [1e-7] * 40, "title": "ü" * 9}}]
    exact = len(json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode())
    assert len(orjson.dumps(part)) < exact
    assert bytes_over(part, exact) is None
    assert bytes_over(part, exact - 1) == exact
    assert bytes_over(part, None) is None
    assert bytes_over([{"n": 2**70}], 4) == len('[{"n":1180591620717411303424}]')
