"""A two-turn tool conversation through Gateway.complete against the loopback fake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore
from gateway import Gateway
from gateway.errors import PolicyViolation
from gateway.result import ToolUse
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import db_path, events, gw, make_gateway, policy_dir  # noqa: F401

QUESTION = "Payment of EUR 9,900 from Jane Roe (GB) to ACME Shipping Ltd (PA)."
LOOKUP = {"name": "ACME Shipping Ltd", "entity_type": "organisation", "country": "PA"}


def _request_body(db: Path, request_id: str) -> dict[str, Any]:
    with AuditStore.open(f"sqlite:///{db}", durability="os") as store:
        request = store.events_for_request(request_id)[0]
        body: dict[str, Any] = json.loads(store.payload(request.payload_digests["request_body"]))
    return body


def test_a_tool_call_and_its_result_are_two_linked_recorded_turns(
    gw: Gateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    fake_api.script(
        Reply.tool_use(("toolu_01", "lookup_entity", LOOKUP)),
        Reply.ok("PARTY: ACME Shipping Ltd RESULT: CLEAR\nDECISION: RELEASE"),
    )
    first = gw.complete("sanctions_screening", QUESTION, caller="payments-svc")
    assert first.stop_reason == "tool_use"
    assert first.tool_uses == (ToolUse("toolu_01", "lookup_entity", LOOKUP),)
    assert [b["type"] for b in first.content] == ["text", "tool_use"]

    conversation = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": list(first.content)},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "[]"}],
        },
    ]
    second = gw.complete("sanctions_screening", messages=conversation, caller="payments-svc")
    assert "RELEASE" in second.text and second.tool_uses == ()

    sent_first, sent_second = (r.json for r in fake_api.requests)
    assert sent_first is not None and sent_second is not None
    assert [t["name"] for t in sent_first["tools"]] == ["lookup_entity"]
    assert sent_second["messages"] == conversation
    # The audit record holds what was sent: the tools, and the result linked to its call.
    recorded_first = _request_body(db_path, first.request_id)
    recorded_second = _request_body(db_path, second.request_id)
    assert recorded_first["tools"] == sent_first["tools"]
    call = recorded_second["messages"][1]["content"][1]
    answer = recorded_second["messages"][2]["content"][0]
    assert (call["type"], answer["type"]) == ("tool_use", "tool_result")
    assert answer["tool_use_id"] == call["id"] == "toolu_01"


def test_a_result_for_an_unmade_call_is_rejected_recorded_and_not_sent(
    gw: Gateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    conversation = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "I will check."},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_99", "content": "[]"}],
        },
    ]
    with pytest.raises(PolicyViolation) as caught:
        gw.complete("sanctions_screening", messages=conversation, caller="payments-svc")
    assert caught.value.key == "tools.file"
    assert fake_api.requests == []
    [rejected] = events(db_path)
    assert str(rejected.kind) == "rejected"
    assert rejected.data["key"] == "tools.file"
