"""Tool tasks run offline: the local model answers with a canned call whose input matches the
tool's schema, then with text once the call's result is in the conversation."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gateway import Gateway, UpstreamRejected
from tests.gateway.conftest import MakeGateway, db_path, kinds, make_gateway, policy_dir  # noqa: F401 - fixtures

QUESTION = "ACME Shipping Ltd"


def _schema(folder: Path) -> dict[str, object]:
    [tool] = json.loads((folder / "tools" / "lookup_entity.json").read_text())
    return dict(tool["input_schema"])


def test_a_tool_task_calls_its_tool_then_answers_the_result(
    make_gateway: MakeGateway,  # noqa: F811
    policy_dir: Path,  # noqa: F811
) -> None:
    gw: Gateway = make_gateway(offline=True)
    first = gw.complete("sanctions_screening", QUESTION, caller="kyc")
    assert first.stop_reason == "tool_use"
    [call] = first.tool_uses
    assert call.name == "lookup_entity"
    jsonschema.validate(call.input, _schema(policy_dir))  # strict: the input matches
    assert call.input["name"] == QUESTION  # the caller's words, not the system prompt's
    second = gw.complete(
        "sanctions_screening",
        messages=[
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": list(first.content)},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "[]"}],
            },
        ],
        caller="kyc",
    )
    assert second.stop_reason != "tool_use" and second.tool_uses == ()


def test_a_streamed_tool_call_is_the_same_call(make_gateway: MakeGateway) -> None:  # noqa: F811
    gw: Gateway = make_gateway(offline=True)
    with gw.stream("sanctions_screening", QUESTION, caller="kyc") as stream:
        types = [event["type"] for event in stream]
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert stream.result.stop_reason == "tool_use"
    assert stream.result.tool_uses[0].name == "lookup_entity"


def test_a_schema_the_canned_call_cannot_satisfy_fails_and_is_recorded(
    make_gateway: MakeGateway,  # noqa: F811
    policy_dir: Path,  # noqa: F811
    db_path: Path,  # noqa: F811
) -> None:
    path = policy_dir / "tools" / "lookup_entity.json"
    [tool] = json.loads(path.read_text())
    tool["input_schema"]["properties"]["name"]["pattern"] = "^[0-9]{8}$"  # an LEI-like id
    path.write_text(json.dumps([tool]))
    gw: Gateway = make_gateway(offline=True)
    with pytest.raises(UpstreamRejected) as caught:
        gw.complete("sanctions_screening", QUESTION, caller="kyc")
    assert caught.value.error_type == "local_request_error"
    assert kinds(db_path) == ["request", "failed"]  # never a call that breaks its schema
