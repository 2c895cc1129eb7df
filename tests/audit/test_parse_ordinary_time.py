"""The ordinary-body parse reads recorded_at in one call with its "Z": for every spelling
that passes its fixed-width guards it gives what the general path gives, or steps aside."""

from __future__ import annotations

import json

import pytest

from audit.verify.body import _parse_any, _parse_ordinary

SPELLINGS = [
    "2026-11-30T12:00:00.123456Z",  # the store's
    "2026-11-30T12:00:00.1+0100Z",  # an offset before the Z: the general path overrides it
    "2026-11-30T12:00:00+01:00:0Z",
    "2026-11-30T12:00:00,123456Z",  # a comma for the decimal point
    "2026-11-30T12:00:00.12345ZZ",
    "2026-11-30T24:00:00.000000Z",
    "2026-02-30T12:00:00.123456Z",
    "2026-11-30T12:00:00.1234567",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_recorded_at_reads_as_the_general_path_reads_it(text: str) -> None:
    fields = {"kind": "request", "payloads": {}, "policy_ref": None, "recorded_at": text}
    body = json.dumps({**fields, "request_id": "r", "seq": 7, "v": 1}).encode()
    ordinary, general = _parse_ordinary(body), _parse_any(body)
    assert ordinary is None or ordinary == general
    if isinstance(general, dict) and ordinary is not None:
        assert ordinary["_time"].tzinfo is general["_time"].tzinfo
