"""A request carrying caller parts (system prompt, tools) keys and records exactly as it did
before the request path was made cheaper for large bodies: its request hash, the canonical
bytes of its REQUEST data (all but the gateway version) and its wire bytes are pinned here.

A change that moves one of these digests changes every replay key or every REQUEST of such
traffic; it must be deliberate (and then the constants are updated with a note why)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from audit.canonical import canonical_bytes, digest
from gateway import Gateway
from gateway.policy import IN_BODY, in_body_overrides
from gateway.request import Request

ROOT = Path(__file__).resolve().parents[2]

# From the code before the request path shared its canonical forms (perf branch, 2026-12-02).
PINNED_HASH = "sha256:c742f70c059158fb71ce3e098194ff3e812e6857c230c6eb396c8cfd0e044f26"
# Changed on purpose (2026-12-03): the REQUEST's data names the caller's system prompt and
# tools by size; the parts themselves moved to its sealed ``overrides`` payload (content that
# erasure reaches and a PostgreSQL reviewer reads only against an ACCESS record); and again:
# the parts the wire body holds as sent are named there (requested_in_body), not copied.
PINNED_DATA = "sha256:2db248619afe847947511514e4c7a0d99992cb43e3f1a3a43dfba714fcb9a5b1"
PINNED_WIRE = "sha256:b18cc4e7f890b276dcda851c9b3694d76a4107b0a350c9048164f81d76266f86"


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
        intent = gw._core.pipeline.records.intent(prepared)
        data = dict(intent.data)
        data.pop("gateway_version")
        assert data["requested"]["system"] == {"bytes": 1122}
        wire = gw._core.provider(prepared).wire_bytes(prepared.body)
        # The prompt and tools are the body's as sent: named there, in no second payload.
        assert data[IN_BODY] == {"system": ["system", 1, "text"], "tools": ["tools"]}
        assert "overrides" not in intent.payloads
        held = {"max_tokens": 1024}
        assert in_body_overrides(held, data, json.loads(wire)) == prepared.plan.requested
        assert prepared.plain_hash == PINNED_HASH  # keyed on the record: the plain one is pinned
        assert digest(canonical_bytes(data)) == PINNED_DATA
        assert digest(wire) == PINNED_WIRE
    finally:
        gw.close()
