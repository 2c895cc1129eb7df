"""The plan's copy of a caller's parts is exactly what the caller sent: same values and same
types (an integer stays an integer at any size, a float keeps its bits), since the request
hash and the REQUEST are made from it."""

from __future__ import annotations

from typing import Any

from gateway.policy._contract import _owned


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
