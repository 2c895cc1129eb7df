"""The REQUEST records the caller's tools and system prompt once: in its request_body payload
(the exact bytes sent), named from the event's data (``requested_in_body``), not copied into
the sealed ``overrides`` payload beside them. Read back with the body, the overrides are
exactly what the caller sent; a part the plan combined with the policy's (a list of system
blocks after the policy's prompt) stays in the ``overrides`` payload as sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from audit import AuditStore
from audit.canonical import canonical_bytes
from gateway import AsyncGateway, Gateway, Settings
from gateway.policy import IN_BODY, in_body_overrides
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


def _request(db: Path, request_id: str) -> tuple[dict[str, Any], dict[str, Any] | None, bytes]:
    """The REQUEST's data, its ``overrides`` payload (None without one) and its wire body."""
    with AuditStore.open(f"sqlite:///{db}", durability="os") as store:
        [request] = [e for e in store.events_for_request(request_id) if e.kind == "request"]
        digests = request.payload_digests
        wire = store.payload(digests["request_body"])
        held = json.loads(store.payload(digests["overrides"])) if "overrides" in digests else None
        return dict(request.data), held, wire


def test_the_callers_tools_and_prompt_are_recorded_once_in_the_request_body(
    gw: Gateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    fake_api.script(Reply.ok("ok"))
    overrides = {"system": f"Sign as the desk bot. {MARK}-system", "tools": TOOLS, "max_tokens": 99}
    result = gw.complete("general_assistant", messages=USER, caller="desk", overrides=overrides)
    data, held, wire = _request(db_path, result.request_id)
    assert wire == fake_api.requests[-1].body
    assert held is None  # no second copy of the tools or the prompt
    assert MARK.encode() not in canonical_bytes(data)
    # The caller's text follows the policy's block: named there, as the very text sent.
    assert data[IN_BODY] == {"system": ["system", 1, "text"], "tools": ["tools"]}
    assert data["requested"]["max_tokens"] == 99
    assert in_body_overrides({"max_tokens": 99}, data, json.loads(wire)) == overrides


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
    data, held, wire = _request(db_path, result.request_id)
    assert data[IN_BODY] == {"tools": ["tools"]}
    assert held == {"system": blocks}
    assert in_body_overrides(held, data, json.loads(wire)) == overrides


def test_a_request_without_caller_parts_records_as_before(
    gw: Gateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    fake_api.script(Reply.ok("ok"))
    result = gw.complete("general_assistant", messages=USER, overrides={"max_tokens": 99})
    data, held, _ = _request(db_path, result.request_id)
    assert IN_BODY not in data and held is None
    assert data["requested"] == {"max_tokens": 99}


def test_a_body_without_the_named_part_reads_as_unreadable() -> None:
    data = {"requested": {"max_tokens": 9}, IN_BODY: {"tools": ["tools"]}}
    held = {"max_tokens": 9}
    assert in_body_overrides(held, data, {"tools": TOOLS}) == {"max_tokens": 9, "tools": TOOLS}
    assert in_body_overrides(held, data, {"messages": []}) is None
    assert in_body_overrides(held, data, None) is None
    # A REQUEST recorded before requested_in_body holds every override elsewhere.
    assert in_body_overrides({"tools": TOOLS}, {"requested": {}}, None) == {"tools": TOOLS}


def test_async_calls_record_the_overrides_payload_too(
    policy_dir: Path,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    """AsyncGateway commits its intent from the event loop (Recorder.acommit): the same
    REQUEST, its ``overrides`` payload included."""
    blocks = [{"type": "text", "text": "Sign as the desk bot."}]
    fake_api.script(Reply.ok("ok"))
    overrides = {"system": blocks, "tools": TOOLS}
    settings = Settings(
        policy_dir=policy_dir,
        database_url=f"sqlite:///{db_path}",
        anthropic_api_key="sk-test",
        anthropic_base_url=fake_api.base_url,
        durability="os",
    )

    async def call() -> str:
        async with AsyncGateway(settings) as agw:
            result = await agw.complete(
                "general_assistant", messages=USER, caller="desk", overrides=overrides
            )
            return result.request_id

    request_id = asyncio.run(call())
    data, held, wire = _request(db_path, request_id)
    assert held == {"system": blocks}
    assert in_body_overrides(held, data, json.loads(wire)) == overrides
