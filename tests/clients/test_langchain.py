"""langchain-anthropic (from PyPI) through `gateway serve`: a system message,
`with_structured_output` by both of its methods, and streaming, each on a real model id that the
routing table sends to the caller's task (general_assistant for any caller, structured_extraction
for the extraction pipelines); the strict policy still refuses the same requests."""

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
PERSON = {"name": "Ada Lovelace", "age": 36}


def ask(
    gateway: ServerProcess, langchain: PythonClient, scenario: str, key: str, model: str = MODEL
) -> dict[str, Any]:
    env = client_env(gateway, key, MODEL=model)
    return run_python(langchain, "langchain_calls.py", scenario, env)


def test_a_system_message_reaches_the_model_after_the_policy_prompt(
    gateway: ServerProcess, fake: FakeMessagesAPI, langchain: PythonClient
) -> None:
    key = caller_key(gateway, "lc-desk")
    fake.script(Reply.ok(text="Hello from the assistant."))
    out = ask(gateway, langchain, "system", key)
    assert out == {"value": "Hello from the assistant."}
    sent = fake.requests[-1].json
    assert sent is not None
    assert "You are a helpful assistant. Be brief." in str(sent["system"])
    assert sent["max_tokens"] <= 128000  # langchain's own default for this model, or the cap
    assert [(e.kind, e.caller) for e in requests_of(gateway, "lc-desk")] == [
        ("request", "lc-desk"),
        ("response", "lc-desk"),
    ]


@pytest.mark.parametrize("method", ["structured_tool", "structured_json_schema"])
def test_with_structured_output_returns_the_typed_object(
    gateway: ServerProcess, fake: FakeMessagesAPI, langchain: PythonClient, method: str
) -> None:
    key = caller_key(gateway, "extraction-pipelines")
    if method == "structured_tool":
        fake.script(Reply.tool_use(("toolu_lc", "Person", PERSON)))
    else:
        fake.script(Reply.ok(json_text='{"name": "Ada Lovelace", "age": 36}'))
    out = ask(gateway, langchain, method, key)
    assert out == {"value": PERSON}
    sent = fake.requests[-1].json
    assert sent is not None
    if method == "structured_tool":
        assert sent["tool_choice"] == {"type": "tool", "name": "Person"}
    else:
        assert sent["output_config"]["format"]["type"] == "json_schema"


def test_streaming_delivers_the_answer_in_chunks(
    gateway: ServerProcess, fake: FakeMessagesAPI, langchain: PythonClient
) -> None:
    key = caller_key(gateway, "lc-stream")
    fake.script(Reply.ok(text="Streamed hello to you."))
    out = ask(gateway, langchain, "stream", key)
    chunks = out["value"]
    assert "".join(chunks) == "Streamed hello to you." and len([c for c in chunks if c]) > 1
    assert fake.requests[-1].json is not None and fake.requests[-1].json["stream"] is True


def test_the_strict_policy_still_refuses_each_request(
    gateway: ServerProcess, fake: FakeMessagesAPI, langchain: PythonClient
) -> None:
    key = caller_key(gateway, "lc-strict")
    before = len(fake.requests)
    scenarios = ["system", "structured_tool", "structured_json_schema", "stream"]
    env = client_env(gateway, key, MODEL="compliance_review")
    out = run_python_all(langchain, "langchain_calls.py", scenarios, env)
    for scenario in scenarios:
        assert_refused_by_policy(out[scenario])
    assert len(fake.requests) == before  # nothing went upstream
