"""The official Python SDK (the project's own, from PyPI) and TypeScript SDK (from npm) through
`gateway serve`, asking for a real Claude model id: the routing table picks the task by the
caller key (any caller: general_assistant; the review desk: the strict compliance_review, which
still refuses a caller's system prompt), or the key's own default task (`keys create --task`)."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.clients.installs import NodeClient
from tests.clients.runner import caller_key, client_env, run_node
from tests.clients.verdicts import assert_refused_by_policy, requests_of
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` (and node) as processes

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a helpful assistant. Be brief."
QUESTION = [{"role": "user", "content": "Hello"}]


def python_sdk(gateway: ServerProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.base_url, api_key=key, max_retries=0)


def typescript(
    gateway: ServerProcess, client: NodeClient, scenario: str, key: str
) -> dict[str, Any]:
    return run_node(
        client, "typescript_sdk_calls.js", scenario, client_env(gateway, key, MODEL=MODEL)
    )


def test_the_python_sdk_asks_for_a_real_model_and_gets_the_general_assistant(
    gateway: ServerProcess, fake: FakeMessagesAPI
) -> None:
    key = caller_key(gateway, "py-desk")
    fake.script(Reply.ok(text="Hello from the assistant."), Reply.ok(text="Streamed hello."))
    client = python_sdk(gateway, key)
    message = client.messages.create(
        model=MODEL,
        max_tokens=1024,
        system=SYSTEM,
        messages=QUESTION,  # type: ignore[arg-type]
    )
    assert message.content[0].text == "Hello from the assistant."  # type: ignore[union-attr]
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=QUESTION) as stream:  # type: ignore[arg-type]
        assert stream.get_final_text() == "Streamed hello."
    assert fake.requests[-2].json is not None and SYSTEM in str(fake.requests[-2].json["system"])
    kinds = [str(e.kind) for e in requests_of(gateway, "py-desk")]
    assert kinds == ["request", "response", "request", "response"]


def test_the_typescript_sdk_asks_for_a_real_model_and_gets_the_general_assistant(
    gateway: ServerProcess, fake: FakeMessagesAPI, typescript_sdk: NodeClient
) -> None:
    key = caller_key(gateway, "ts-desk")
    fake.script(Reply.ok(text="Hello from the assistant."), Reply.ok(text="Streamed hello."))
    system = typescript(gateway, typescript_sdk, "system", key)
    assert system == {"value": {"text": "Hello from the assistant.", "model": MODEL}}
    assert typescript(gateway, typescript_sdk, "stream", key) == {
        "value": {"text": "Streamed hello."}
    }
    kinds = [str(e.kind) for e in requests_of(gateway, "ts-desk")]
    assert kinds == ["request", "response", "request", "response"]


def test_a_caller_routed_to_the_strict_policy_is_served_by_it_and_refused_a_system_prompt(
    gateway: ServerProcess, fake: FakeMessagesAPI, typescript_sdk: NodeClient
) -> None:
    key = caller_key(gateway, "review-desk")  # routed to compliance_review (conftest.ROUTED)
    fake.script(Reply.ok(text="No finding."))
    # A plain request for a real model id runs under the caller's strict task ...
    plain = python_sdk(gateway, key).messages.create(
        model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "42 EUR to ACME"}]
    )
    assert plain.content[0].text == "No finding."  # type: ignore[union-attr]
    sent = fake.requests[-1].json
    assert sent is not None and "compliance" in str(sent["system"]).lower()  # the policy's prompt
    before = len(fake.requests)
    # ... and a caller system prompt is refused there, from both SDKs, naming the policy.
    with pytest.raises(anthropic.BadRequestError) as refused:
        python_sdk(gateway, key).messages.create(
            model=MODEL,
            max_tokens=1024,
            system=SYSTEM,
            messages=QUESTION,  # type: ignore[arg-type]
        )
    message = refused.value.body["error"]["message"]  # type: ignore[index]
    assert_refused_by_policy({"error": {"status": 400, "message": message}})
    assert_refused_by_policy(typescript(gateway, typescript_sdk, "system", key))
    assert len(fake.requests) == before


def test_a_keys_default_task_takes_its_real_model_ids_before_the_catch_all(
    gateway: ServerProcess, fake: FakeMessagesAPI, typescript_sdk: NodeClient
) -> None:
    key = caller_key(gateway, "audit-desk", task="compliance_review")  # no route names it
    fake.script(Reply.ok(text="No finding."))
    plain = python_sdk(gateway, key).messages.create(
        model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "7 CHF to Globex"}]
    )
    assert plain.content[0].text == "No finding."  # type: ignore[union-attr]
    sent = fake.requests[-1].json
    assert sent is not None and "compliance" in str(sent["system"]).lower()
    before = len(fake.requests)
    assert_refused_by_policy(typescript(gateway, typescript_sdk, "system", key))
    assert len(fake.requests) == before
