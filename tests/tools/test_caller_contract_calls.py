"""Opened contracts through Gateway.complete against the loopback fake: the REQUEST records
exactly what was sent (the caller's parts in the wire bytes, the values as requested, the
cap, the beta values that went as a header), and the caller's schema or forced tool checks
the answer as the policy's own schema would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore
from gateway import Gateway
from gateway.errors import OutputValidationError, PolicyViolation
from gateway.policy import in_body_overrides
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import (  # noqa: F401
    MakeGateway,
    db_path,
    events,
    make_gateway,
    policy_dir,
)
from tests.policy.test_shipped_contracts import claude_code_request

AGENT = """\
schema = 1
description = "A test agent task."
owner = "tests"

[model]
id = "claude-sonnet-4-6"

[generation]
max_tokens = 4096

[cache]
mode = "record"

[input]
cache_control = true

[caller]
max_tokens = { min = 1, max = 16000, over = "cap" }
thinking = { allowed = ["enabled", "adaptive", "disabled"], max_budget_tokens = 8000 }
system = { mode = "own", max_bytes = 4096 }
metadata = { allowed = ["user_id"] }
betas = { allowed = ["interleaved-thinking-2025-05-14", "context-management-2025-06-27"] }

[caller.tools]
allow = ["*"]
deny = ["computer*"]
max_count = 8
max_bytes = 8192
"""
SYSTEM = [
    {"type": "text", "text": "You are a coding agent."},
    {"type": "text", "text": "Work in /repo.", "cache_control": {"type": "ephemeral"}},
]
TOOLS = [
    {
        "name": "Read",
        "description": "Read a file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {"name": "Bash", "input_schema": {"type": "object"}},
]
USER = [{"role": "user", "content": [{"type": "text", "text": "Read setup.py"}]}]


@pytest.fixture
def agent(policy_dir: Path, make_gateway: MakeGateway) -> Gateway:  # noqa: F811
    (policy_dir / "agent_task.toml").write_text(AGENT)
    return make_gateway()


def recorded(db: Path, request_id: str) -> tuple[dict[str, Any], bytes]:
    with AuditStore.open(f"sqlite:///{db}", durability="os") as store:
        request = store.events_for_request(request_id)[0]
        return dict(request.data), store.payload(request.payload_digests["request_body"])


def recorded_overrides(db: Path, request_id: str) -> dict[str, Any]:
    """The overrides as the caller sent them: content (a system prompt, tools) is in the
    REQUEST's sealed ``overrides`` payload, or, where the body holds it as sent, in its
    request body (``requested_in_body``); its data names each part by size alone."""
    with AuditStore.open(f"sqlite:///{db}", durability="os") as store:
        request = store.events_for_request(request_id)[0]
        digests = request.payload_digests
        body = json.loads(store.payload(digests["request_body"]))
        held = json.loads(store.payload(digests["overrides"])) if "overrides" in digests else {}
    overrides = in_body_overrides(held, request.data, body)
    assert isinstance(overrides, dict)
    return overrides


def test_the_request_records_exactly_what_the_caller_sent(
    agent: Gateway,
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    fake_api.script(Reply.tool_use(("toolu_1", "Read", {"path": "setup.py"})))
    overrides: dict[str, Any] = {
        "system": SYSTEM,
        "tools": TOOLS,
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 4000},
        "metadata": {"user_id": "session-42"},
        "max_tokens": 32_000,
        "betas": ["interleaved-thinking-2025-05-14"],
    }
    result = agent.complete("agent_task", messages=USER, caller="dev", overrides=overrides)
    assert result.capped == {"max_tokens": 16000}
    [sent] = fake_api.requests
    assert sent.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    data, body = recorded(db_path, result.request_id)
    assert body == sent.body  # the wire bytes, as recorded
    wire = json.loads(body)
    assert wire["system"] == SYSTEM and wire["tools"] == TOOLS
    assert wire["thinking"] == overrides["thinking"]
    assert wire["metadata"] == {"user_id": "session-42"}
    assert wire["max_tokens"] == 16000 and "anthropic_beta" not in wire
    assert recorded_overrides(db_path, result.request_id) == overrides  # 32,000 included
    assert data["requested"]["max_tokens"] == 32_000  # settings as given, in the data
    size = len(json.dumps(SYSTEM, separators=(",", ":")))
    assert data["requested"]["system"] == {"bytes": size}  # content: by size alone
    assert "You are a coding agent." not in json.dumps(data)
    assert data["capped"] == {"max_tokens": 16000}
    assert data["anthropic_beta"] == ["interleaved-thinking-2025-05-14"]


def test_a_request_without_betas_sends_no_beta_header(
    agent: Gateway, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok("Done."))
    agent.complete("agent_task", messages=USER, caller="dev", overrides={"system": "Be brief."})
    assert "anthropic-beta" not in fake_api.requests[-1].headers


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"system": "x" * 4097}, "caller.system"),
        ({"tools": [{"name": "computer_20250124", "input_schema": {}}]}, "caller.tools"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "caller.tools"),
        ({"thinking": {"type": "enabled", "budget_tokens": 9000}}, "caller.thinking"),
        ({"betas": ["files-api-2025-04-14"]}, "caller.betas"),
    ],
)
def test_a_bound_that_does_not_hold_is_rejected_recorded_and_not_sent(
    agent: Gateway,
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
    overrides: dict[str, Any],
    key: str,
) -> None:
    with pytest.raises(PolicyViolation) as refused:
        agent.complete("agent_task", messages=USER, caller="dev", overrides=overrides)
    assert refused.value.key == key
    assert fake_api.requests == []
    rejected = events(db_path)[-1]
    assert str(rejected.kind) == "rejected" and rejected.data["key"] == key


SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "number"}},
    "required": ["amount"],
    "additionalProperties": False,
}


def test_the_callers_schema_checks_the_answer_and_flags_a_mismatch(
    make_gateway: MakeGateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    gw = make_gateway()
    form = {"output_format": {"type": "json_schema", "schema": SCHEMA}}
    fake_api.script(Reply.ok('{"amount": 12.5}'), Reply.ok('{"amount": "twelve"}'))
    good = gw.complete("structured_extraction", "EUR 12.50", caller="etl", overrides=form)
    assert good.json == {"amount": 12.5}
    with pytest.raises(OutputValidationError):
        gw.complete("structured_extraction", "EUR twelve", caller="etl", overrides=form)
    responses = [e for e in events(db_path) if str(e.kind) == "response"]
    assert [r.data["ok"] for r in responses] == [True, False]
    assert responses[1].data["output_check"]["checked"] is True


def test_a_forced_tool_is_the_output_and_its_input_is_checked(
    make_gateway: MakeGateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    gw = make_gateway()
    forced = {
        "tools": [{"name": "Trade", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "Trade"},
    }
    fake_api.script(
        Reply.tool_use(("toolu_1", "Trade", {"amount": 3})),
        Reply.tool_use(("toolu_2", "Trade", {"amount": "three"})),
    )
    good = gw.complete("structured_extraction", "EUR 3", caller="etl", overrides=forced)
    assert good.json == {"amount": 3}
    with pytest.raises(OutputValidationError):
        gw.complete("structured_extraction", "EUR three", caller="etl", overrides=forced)
    requests = [e for e in events(db_path) if str(e.kind) == "request"]
    assert requests[-1].data["output_tool"] == "Trade"


def test_a_replayed_task_keys_the_callers_schema(
    make_gateway: MakeGateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
) -> None:
    gw = make_gateway()
    form = {"output_format": {"type": "json_schema", "schema": SCHEMA}}
    other = {"output_format": {"type": "json_schema", "schema": {**SCHEMA, "title": "T"}}}
    fake_api.script(Reply.ok('{"amount": 1}'), Reply.ok('{"amount": 1}'))
    first = gw.complete("structured_extraction", "EUR 1", caller="etl", overrides=form)
    again = gw.complete("structured_extraction", "EUR 1", caller="etl", overrides=form)
    changed = gw.complete("structured_extraction", "EUR 1", caller="etl", overrides=other)
    assert (first.cached, again.cached, changed.cached) == (False, True, False)
    assert len(fake_api.requests) == 2


def test_a_claude_code_turn_passes_the_whole_request_path(
    make_gateway: MakeGateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    request = claude_code_request()
    fake_api.script(Reply.ok("hello"))
    gw = make_gateway()
    with gw.stream(
        "coding_agent", messages=request["messages"], caller="dev", overrides=request["overrides"]
    ) as stream:
        assert "".join(e.get("delta", {}).get("text", "") for e in stream) == "hello"
    sent = fake_api.requests[-1]
    data, body = recorded(db_path, stream.request_id)
    assert body == sent.body and len(body) > 90_000
    assert sent.headers["anthropic-beta"] == ",".join(request["overrides"]["betas"])
    assert recorded_overrides(db_path, stream.request_id) == request["overrides"]
    assert set(data["requested"]) == set(request["overrides"])
