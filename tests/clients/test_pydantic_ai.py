"""pydantic-ai (from PyPI) with its default settings through `gateway serve`: `instructions=`,
a typed `output_type` and a tool, on a real model id that the routing table sends to the caller's
task; the strict policy still refuses the same requests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.installs import PythonClient
from tests.clients.runner import caller_key, client_env, run_python, run_python_all
from tests.clients.verdicts import assert_refused_by_policy, requests_of
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` and the client as processes

MODEL = "claude-sonnet-4-6"


def ask(
    gateway: ServerProcess, client: PythonClient, scenario: str, key: str, model: str = MODEL
) -> dict[str, Any]:
    env = client_env(gateway, key, MODEL=model)
    return run_python(client, "pydantic_ai_calls.py", scenario, env)


def test_instructions_are_sent_as_the_callers_system_prompt(
    gateway: ServerProcess, fake: FakeMessagesAPI, pydantic_ai: PythonClient
) -> None:
    key = caller_key(gateway, "pai-desk")
    fake.script(Reply.ok(text="Hello from the assistant."))
    assert ask(gateway, pydantic_ai, "instructions", key) == {"value": "Hello from the assistant."}
    sent = fake.requests[-1].json
    assert sent is not None and "You are a helpful assistant. Be brief." in str(sent["system"])
    assert sent["stream"] is True  # pydantic-ai streams even run_sync
    kinds = [str(e.kind) for e in requests_of(gateway, "pai-desk")]
    assert kinds == ["request", "response"]


def test_a_typed_output_type_comes_back_validated(
    gateway: ServerProcess, fake: FakeMessagesAPI, pydantic_ai: PythonClient
) -> None:
    key = caller_key(gateway, "extraction-pipelines")
    person = {"name": "Ada Lovelace", "age": 36}
    fake.script(Reply.tool_use(("toolu_pai", "final_result", person)))
    assert ask(gateway, pydantic_ai, "output_type", key) == {"value": person}
    sent = fake.requests[-1].json
    assert sent is not None and [t["name"] for t in sent["tools"]] == ["final_result"]


def test_a_tool_is_called_and_its_result_answered_turn_by_turn(
    gateway: ServerProcess, fake: FakeMessagesAPI, pydantic_ai: PythonClient
) -> None:
    key = caller_key(gateway, "pai-tools")
    fake.script(
        Reply.tool_use(("toolu_weather", "weather", {"city": "Paris"})),
        Reply.ok(text="It is sunny in Paris."),
    )
    out = ask(gateway, pydantic_ai, "tool", key)
    assert out == {"value": {"output": "It is sunny in Paris.", "requests": 4}}
    second = fake.requests[-1].json
    assert second is not None
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "sunny in Paris" in str(result["content"])
    kinds = [str(e.kind) for e in requests_of(gateway, "pai-tools")]
    assert kinds == ["request", "response", "request", "response"]  # both turns recorded


def test_the_strict_policy_still_refuses_each_request(
    gateway: ServerProcess, fake: FakeMessagesAPI, pydantic_ai: PythonClient
) -> None:
    key = caller_key(gateway, "pai-strict")
    before = len(fake.requests)
    scenarios = ["instructions", "output_type", "tool"]
    env = client_env(gateway, key, MODEL="compliance_review")
    out = run_python_all(pydantic_ai, "pydantic_ai_calls.py", scenarios, env)
    for scenario in scenarios:
        assert_refused_by_policy(out[scenario])
    assert len(fake.requests) == before
