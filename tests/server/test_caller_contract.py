"""Opened contracts through `gateway serve` as a real process: the shipped general_assistant,
structured_extraction and coding_agent admit a caller's own parts, send them as sent, record
exactly what went on the wire, cap max_tokens with a header saying so, pass anthropic-beta
values the policy allows as the header (recorded and keyed), and refuse each bound that does
not hold with a 400 naming the [caller] key."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2 as httpx
import pytest

from audit import AuditStore
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` as a process

PROMPT = [{"role": "user", "content": "Draft a two-line note to the FX desk."}]
TOOL = {
    "name": "lookup_rate",
    "description": "Look up an FX rate.",
    "input_schema": {"type": "object", "properties": {"pair": {"type": "string"}}},
}
BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14"
FILES_BETA = "files-api-2025-04-14"


@pytest.fixture(scope="module")
def key(server: ServerProcess) -> str:
    return server.create_key("desk-tools")


@pytest.fixture(scope="module")
def client(server: ServerProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def request_event(server: ServerProcess, request_id: str) -> tuple[dict[str, Any], bytes]:
    with AuditStore.open(server.env["GATEWAY_DATABASE_URL"], "os", create=False) as store:
        request = store.events_for_request(request_id)[0]
        return dict(request.data), store.payload(request.payload_digests["request_body"])


def test_an_assistant_request_with_its_own_system_prompt_and_tools_is_sent_capped(
    server: ServerProcess, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="Noted."))
    raw = client.messages.with_raw_response.create(
        model="general_assistant",
        max_tokens=20_000,  # the SDK streams past 21,333 by itself
        system="Sign as the FX desk bot.",
        tools=[TOOL],  # type: ignore[list-item]
        messages=PROMPT,  # type: ignore[arg-type]
    )
    assert raw.headers["x-gateway-capped"] == "max_tokens=16000"
    message = raw.parse()
    sent = fake.requests[-1]
    assert sent.json is not None
    assert sent.json["max_tokens"] == 16000 and sent.json["tools"] == [TOOL]
    policy_block, caller_block = sent.json["system"]
    assert caller_block == {"type": "text", "text": "Sign as the FX desk bot."}
    assert "compliance gateway" in policy_block["text"]  # the policy's text comes first
    data, recorded = request_event(server, message.id)
    assert recorded == sent.body
    assert data["requested"]["max_tokens"] == 20_000 and data["capped"] == {"max_tokens": 16000}
    # The caller's text is content: named by size in the data, kept in the sealed payload.
    assert data["requested"]["system"] == {"bytes": len('"Sign as the FX desk bot."')}
    assert "FX desk bot" not in json.dumps(data)
    assert set(data["requested_in_body"]) == {"system", "tools"}  # recorded once, in the body


def test_a_streamed_capped_answer_says_so_in_its_headers(
    server: ServerProcess, key: str, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="Streamed."))
    body = {"model": "general_assistant", "max_tokens": 128_000, "messages": PROMPT}
    with httpx.stream(
        "POST",
        f"{server.base_url}/v1/messages",
        json={**body, "stream": True},
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        timeout=30,
    ) as streamed:
        assert streamed.status_code == 200
        assert streamed.headers["x-gateway-capped"] == "max_tokens=16000"
        assert b"message_stop" in streamed.read()


def test_a_coding_agent_turn_with_its_betas_sends_them_as_the_header_and_records_them(
    server: ServerProcess, key: str, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="Done."))
    body = {
        "model": "coding_agent",
        "max_tokens": 64_000,
        "stream": True,
        "system": [
            {
                "type": "text",
                "text": "You are a Claude agent.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "tools": [TOOL],
        "thinking": {"type": "adaptive"},
        "metadata": {"user_id": '{"session_id": "abc"}'},
        "messages": PROMPT,
    }
    with httpx.stream(
        "POST",
        f"{server.base_url}/v1/messages?beta=true",
        json=body,
        headers={"x-api-key": key, "anthropic-version": "2023-06-01", "anthropic-beta": BETAS},
        timeout=30,
    ) as streamed:
        assert streamed.status_code == 200, streamed.read()
        request_id = streamed.headers["request-id"]
        streamed.read()
    sent = fake.requests[-1]
    assert sent.headers["anthropic-beta"] == BETAS
    assert sent.json is not None and "anthropic_beta" not in sent.json
    assert sent.json["system"] == body["system"] and sent.json["metadata"] == body["metadata"]
    data, recorded = request_event(server, request_id)
    assert recorded == sent.body
    assert data["anthropic_beta"] == BETAS.split(",")
    assert data["requested"]["betas"] == BETAS.split(",")


def test_a_structured_extraction_answer_is_checked_against_the_callers_schema(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "string"}},
        "required": ["pair"],
        "additionalProperties": False,
    }
    fake.script(Reply.ok(text='{"pair": "EURUSD"}'))
    answer = client.messages.create(
        model="structured_extraction",
        max_tokens=1024,
        messages=[{"role": "user", "content": "The pair is EURUSD."}],
        extra_body={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
    )
    assert json.loads(answer.content[0].text) == {"pair": "EURUSD"}  # type: ignore[union-attr]
    assert fake.requests[-1].json["output_config"]["format"]["schema"] == schema  # type: ignore[index]


@pytest.mark.parametrize(
    ("task", "extra", "headers", "named"),
    [
        ("general_assistant", {"system": "x" * 70_000}, {}, "caller.system"),
        (
            "general_assistant",
            {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
            {},
            "caller.tools",
        ),
        (
            "general_assistant",
            {"thinking": {"type": "enabled", "budget_tokens": 14_000}},
            {},
            "caller.thinking",
        ),
        ("general_assistant", {}, {"anthropic-beta": FILES_BETA}, "betas"),
        ("coding_agent", {"stream": True}, {"anthropic-beta": FILES_BETA}, "caller.betas"),
        ("compliance_review", {}, {"anthropic-beta": "claude-code-20250219"}, "betas"),
        ("compliance_review", {"system": "Be brief."}, {}, "system"),
    ],
)  # fmt: skip
def test_a_bound_that_does_not_hold_is_a_400_naming_the_key_and_nothing_is_sent(
    server: ServerProcess,
    client: anthropic.Anthropic,
    fake: FakeMessagesAPI,
    task: str,
    extra: dict[str, Any],
    headers: dict[str, str],
    named: str,
) -> None:
    before = len(fake.requests)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model=task,
            max_tokens=2048,
            messages=PROMPT,  # type: ignore[arg-type]
            extra_body=extra,
            extra_headers=headers,
        )
    assert refused.value.status_code == 400
    assert len(fake.requests) == before
    rejected = [e for e in server.audit_events() if str(e.kind) == "rejected"][-1]
    assert rejected.data["key"] == named


def test_count_tokens_counts_the_callers_own_parts_within_the_contract(
    client: anthropic.Anthropic,
) -> None:
    plain = client.messages.count_tokens(model="general_assistant", messages=PROMPT)  # type: ignore[arg-type]
    system = "Sign every note as the FX desk bot. " * 40
    brought = client.messages.count_tokens(
        model="general_assistant",
        system=system,
        tools=[TOOL],  # type: ignore[list-item]
        messages=PROMPT,  # type: ignore[arg-type]
    )
    assert brought.input_tokens >= plain.input_tokens + len(system) // 4
    # A strict policy refuses the caller's system prompt here too, naming the key.
    with pytest.raises(anthropic.BadRequestError, match="'system'"):
        client.messages.count_tokens(
            model="compliance_review",
            system=system,
            messages=PROMPT,  # type: ignore[arg-type]
        )
    # And an opened one its bound: a server tool, which general_assistant allows none of.
    denied = {"type": "web_search_20250305", "name": "web_search"}
    with pytest.raises(anthropic.BadRequestError, match="web_search"):
        client.messages.count_tokens(
            model="general_assistant",
            tools=[denied],  # type: ignore[list-item]
            messages=PROMPT,  # type: ignore[arg-type]
        )
