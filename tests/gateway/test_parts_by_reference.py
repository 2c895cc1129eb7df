"""The REQUEST records the caller's tools and system prompt once: in its request_body payload
(the exact bytes sent), named from the event's data (``requested_in_body``), not copied into
``requested`` beside them. Read back with the body, the overrides are exactly what the caller
sent; a part the plan combined with the policy's (a list of system blocks after the policy's
prompt) stays in ``requested`` as sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from audit import AuditStore
from audit.canonical import canonical_bytes
from gateway import Gateway
from gateway.policy import IN_BODY, recorded_overrides
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import db_path, gw, make_gateway, policy_dir  # noqa: F401

MARK = "desk-tool-description-7f3a"  # appears in the caller's tools only
TOOLS = [
    {
        "name": f"desk_tool_{n}",
        "description": f"{MARK}: looks up record {n} in the desk's systems. " * 4,
        "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}},
    }
    for n in range(8)
]
USER = [{"role": "user", "content": "Momentum on FX majors"}]


def _request(db: Path, request_id: str) -> tuple[dict[str, Any], bytes, bytes]:
    """The REQUEST's data, its canonical event body bytes and its recorded wire body."""
    with AuditStore.open(f"sqlite:///{db}", durability="os") as store:
        [request] = [e for e in store.events_for_request(request_id) if e.kind == "request"]
        wire = store.payload(request.payload_digests["request_body"])
        return dict(request.data), canonical_bytes(request.data), wire


def test_the_callers_tools_and_prompt_are_recorded_once_in_the_request_body(
    gw: Gateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    fake_api.script(Reply.ok("ok"))
    overrides = {"system": f"Sign as the desk bot. {MARK}-system", "tools": TOOLS, "max_tokens": 99}
    result = gw.complete("general_assistant", messages=USER, caller="desk", overrides=overrides)
    data, event_bytes, wire = _request(db_path, result.request_id)
    assert wire == fake_api.requests[-1].body
    assert MARK.encode() not in event_bytes  # no second copy of the tools or the prompt
    # The caller's text follows the policy's block: named there, as the very text sent.
    assert data[IN_BODY] == {"system": ["system", 1, "text"], "tools": ["tools"]}
    assert data["requested"] == {"max_tokens": 99}
    assert recorded_overrides(data, json.loads(wire)) == overrides


def test_a_part_the_plan_combined_with_the_policys_stays_in_requested(
    gw: Gateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    # A list of system blocks goes on the wire after the policy's block, in a new list: not
    # one member of the body as sent, so it is recorded as sent, in requested.
    blocks = [{"type": "text", "text": "Sign as the desk bot."}]
    fake_api.script(Reply.ok("ok"))
    overrides = {"system": blocks, "tools": TOOLS}
    result = gw.complete("general_assistant", messages=USER, caller="desk", overrides=overrides)
    data, _, wire = _request(db_path, result.request_id)
    assert data[IN_BODY] == {"tools": ["tools"]}
    assert data["requested"] == {"system": blocks}
    assert recorded_overrides(data, json.loads(wire)) == overrides


def test_a_request_without_caller_parts_records_as_before(
    gw: Gateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    fake_api.script(Reply.ok("ok"))
    result = gw.complete("general_assistant", messages=USER, overrides={"max_tokens": 99})
    data, _, wire = _request(db_path, result.request_id)
    assert IN_BODY not in data
    assert data["requested"] == {"max_tokens": 99}
    assert recorded_overrides(data, json.loads(wire)) == {"max_tokens": 99}


def test_a_body_without_the_named_part_reads_as_unreadable() -> None:
    data = {"requested": {"max_tokens": 9}, IN_BODY: {"tools": ["tools"]}}
    assert recorded_overrides(data, {"tools": TOOLS}) == {"max_tokens": 9, "tools": TOOLS}
    assert recorded_overrides(data, {"messages": []}) is None
    assert recorded_overrides(data, None) is None
    # A REQUEST recorded before requested_in_body holds every override in requested.
    assert recorded_overrides({"requested": {"tools": TOOLS}}, None) == {"tools": TOOLS}
