"""A request carrying caller parts (system prompt, tools) keys and records exactly as it did
before the request path was made cheaper for large bodies: its request hash, the canonical
bytes of its REQUEST data (all but the gateway version) and its wire bytes are pinned here.

A change that moves one of these digests changes every replay key or every REQUEST of such
traffic; it must be deliberate (and then the constants are updated with a note why).

The REQUEST data changed once, deliberately: the caller parts the wire body holds as sent
are named there (``requested_in_body``) instead of copied into ``requested``
(PINNED_DATA). Read back with the body, they give the data recorded before, byte for byte
in canonical form (PINNED_INLINE_DATA, the digest that form had)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from audit.canonical import canonical_bytes, digest
from gateway import Gateway
from gateway.policy import IN_BODY, recorded_overrides
from gateway.request import Request

ROOT = Path(__file__).resolve().parents[2]

# From the code before the request path shared its canonical forms (perf branch, 2026-12-02).
PINNED_HASH = "sha256:c742f70c059158fb71ce3e098194ff3e812e6857c230c6eb396c8cfd0e044f26"
PINNED_INLINE_DATA = "sha256:e617c0120e59939b2221e2dd9097f097b30acf4aabeb854a5689f63e056059af"
PINNED_WIRE = "sha256:b18cc4e7f890b276dcda851c9b3694d76a4107b0a350c9048164f81d76266f86"
# Since the caller parts are recorded once, in the request body (requested_in_body).
PINNED_DATA = "sha256:2761852fe13525517471279439fffa65993b6f70c5880e415a6579917e8fa24b"


def _tools() -> list[dict[str, Any]]:
    return [
        {
            "name": f"desk_tool_{n:02d}",
            "description": f'Tool {n}: looks up a record; ünïcode, "quotes", tab\t, 1.5e-3.',
            "input_schema": {
                "type": "object",
                "properties": {
                    f"field_{k}": {"type": "integer" if k % 2 else "string", "minimum": 0.0}
                    for k in range(3)
                },
                "required": ["field_0"],
            },
        }
        for n in range(20)
    ]


def _prepared(tmp_path: Path) -> tuple[Any, Gateway]:
    gw = Gateway(
        policy_dir=ROOT / "policies",
        database_url=f"sqlite:///{tmp_path / 'audit.db'}",
        anthropic_api_key="sk-test",
        base_url="http://127.0.0.1:9",
        durability="os",
    )
    overrides = {
        "max_tokens": 1024,
        "system": "You are the desk assistant. " * 40,
        "tools": _tools(),
    }
    request = Request(
        "general_assistant",
        messages=[{"role": "user", "content": "Momentum on FX majors"}],
        caller="desk",
        overrides=overrides,
    )
    return gw._core.pipeline.prepare(request), gw


def test_a_caller_parts_request_keys_and_records_as_pinned(tmp_path: Path) -> None:
    prepared, gw = _prepared(tmp_path)
    try:
        data = dict(gw._core.pipeline.records.intent(prepared).data)
        data.pop("gateway_version")
        wire = gw._core.provider(prepared).wire_bytes(prepared.body)
        assert prepared.plain_hash == PINNED_HASH  # keyed on the record: the plain one is pinned
        assert digest(canonical_bytes(data)) == PINNED_DATA
        assert digest(wire) == PINNED_WIRE
        assert data[IN_BODY] == {"system": ["system", 1, "text"], "tools": ["tools"]}
        inline = {k: v for k, v in data.items() if k != IN_BODY}
        inline["requested"] = recorded_overrides(data, json.loads(wire))
        assert digest(canonical_bytes(inline)) == PINNED_INLINE_DATA
    finally:
        gw.close()
