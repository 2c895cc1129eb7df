"""Tools through `gateway serve` with the official Python SDK: a task whose policy declares
tools (sanctions_screening, ``[tools] file``) takes the policy's definitions from a client,
or sends them itself when the client leaves them out; other tools or another tool_choice are
a 400 naming the policy key. A two-turn conversation, plain and streamed, the fake calling
the tool."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anthropic
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import SHIPPED, ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` as a process

TASK = "sanctions_screening"
POLICY_TOOLS: list[dict[str, Any]] = json.loads(
    (SHIPPED / "tools" / "lookup_entity.json").read_text()
)
_count = itertools.count()


def fresh() -> str:
    return f"Payment to Vessel Nr {next(_count)} of Oceanic Freight"


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> anthropic.Anthropic:
    key = server.create_key("fincrime-svc")
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def tool_result_turn(answer: anthropic.types.Message, found: str) -> dict[str, Any]:
    [call] = [b for b in answer.content if b.type == "tool_use"]
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call.id, "content": found}],
    }


def kinds(server: ServerProcess, request_id: str) -> list[str]:
    return [str(e.kind) for e in server.audit_events() if e.request_id == request_id]


def test_a_two_turn_tool_conversation_with_the_policys_tools_sent_by_the_client(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    name = fresh()
    call = {"name": name, "entity_type": "vessel"}
    fake.script(Reply.tool_use(("toolu_01", "lookup_entity", call)), Reply.ok(text="No match."))
    question = {"role": "user", "content": name}
    first = client.messages.create(
        model=TASK,
        max_tokens=2048,
        messages=[question],
        tools=POLICY_TOOLS,  # type: ignore[arg-type]
        tool_choice={"type": "auto"},
    )
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert (use.id, use.name, use.input) == ("toolu_01", "lookup_entity", call)
    sent = fake.requests[-1].json
    assert sent is not None
    assert sent["tools"] == POLICY_TOOLS and sent["tool_choice"] == {"type": "auto"}

    # The second turn leaves the tools out: the gateway sends the policy's.
    second = client.messages.create(
        model=TASK,
        max_tokens=2048,
        messages=[
            question,
            {"role": "assistant", "content": first.content},  # type: ignore[typeddict-item]
            tool_result_turn(first, "[]"),
        ],
    )
    assert second.content[0].text == "No match."  # type: ignore[union-attr]
    sent = fake.requests[-1].json
    assert sent is not None and sent["tools"] == POLICY_TOOLS
    assert sent["messages"][1]["content"][-1]["type"] == "tool_use"
    assert sent["messages"][2]["content"][0]["tool_use_id"] == "toolu_01"
    assert kinds(server, second.id) == ["request", "response"]


def test_a_streamed_tool_call_arrives_whole_and_its_result_is_answered_streamed(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    name = fresh()
    call = {"name": name, "entity_type": "organisation", "country": "PA"}
    fake.script(Reply.tool_use(("toolu_02", "lookup_entity", call)), Reply.ok(text="Listed."))
    question = {"role": "user", "content": name}
    with client.messages.stream(
        model=TASK,
        max_tokens=2048,
        messages=[question],
        tools=POLICY_TOOLS,  # type: ignore[arg-type]
    ) as stream:
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert (use.id, use.input) == ("toolu_02", call)
    found = '[{"list": "OFAC SDN"}]'
    with client.messages.stream(
        model=TASK,
        max_tokens=2048,
        messages=[
            question,
            {"role": "assistant", "content": first.content},  # type: ignore[typeddict-item]
            tool_result_turn(first, found),
        ],
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == "Listed."
    sent = fake.requests[-1].json
    assert sent is not None and sent["messages"][2]["content"][0]["content"] == found


def _changed_description() -> list[dict[str, Any]]:
    return [{**POLICY_TOOLS[0], "description": "Look up anything."}]


_EXTRA = {"name": "wire_money", "input_schema": {"type": "object"}}


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"tools": _changed_description()}, "tools.file"),
        ({"tools": [*POLICY_TOOLS, _EXTRA]}, "tools.file"),
        ({"tools": []}, "tools.file"),
        ({"tool_choice": {"type": "any"}}, "tools.choice"),
        ({"tool_choice": {"type": "tool", "name": "lookup_entity"}}, "tools.choice"),
        ({"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}, "tools.choice"),
    ],
)
def test_other_tools_or_another_choice_is_a_400_naming_the_policy_key(
    server: ServerProcess,
    client: anthropic.Anthropic,
    fake: FakeMessagesAPI,
    extra: dict[str, Any],
    named: str,
) -> None:
    upstream_before = len(fake.requests)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model=TASK,
            max_tokens=2048,
            messages=[{"role": "user", "content": fresh()}],
            extra_body=extra,
        )
    error = refused.value
    assert named in error.message
    assert error.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert error.response.headers["x-should-retry"] == "false"
    assert len(fake.requests) == upstream_before
    rejected = [e for e in server.audit_events() if str(e.kind) == "rejected"][-1]
    assert rejected.caller == "fincrime-svc" and rejected.data["key"] == named


def test_a_result_for_a_call_never_made_is_refused_by_the_policy_check(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    upstream_before = len(fake.requests)
    forged = [
        {"role": "user", "content": fresh()},
        {"role": "assistant", "content": "I looked it up."},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_99", "content": "[]"}],
        },
    ]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model=TASK, max_tokens=2048, messages=forged)  # type: ignore[arg-type]
    assert "tool_use_id" in refused.value.message
    assert len(fake.requests) == upstream_before
    rejected = [e for e in server.audit_events() if str(e.kind) == "rejected"][-1]
    assert rejected.data["key"] == "tools.file"


def test_zz_the_log_verifies(server: ServerProcess) -> None:
    done = server.verify()
    assert done.returncode == 0, done.stdout + done.stderr
