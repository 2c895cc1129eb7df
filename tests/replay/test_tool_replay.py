"""Tool conversations under replay: both turns verify, and a tool request is a cache hit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventKind
from gateway import Gateway
from gateway.cli import main
from gateway.result import ToolUse
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY

QUESTION = "Payment of EUR 9,900 from Jane Roe (GB) to ACME Shipping Ltd (PA)."
LOOKUP = {"name": "ACME Shipping Ltd", "entity_type": "organisation", "country": "PA"}
CALLER = "payments-svc"


@dataclass(frozen=True)
class Conversation:
    url: str
    first: str  # the request answered with a tool_use
    second: str  # the request carrying the tool_result
    first_tool_uses: tuple[ToolUse, ...]
    messages: list[dict[str, Any]]  # the second turn's messages


def _gateway(policy_dir: Path, url: str, fake_api: FakeMessagesAPI) -> Gateway:
    return Gateway(
        policy_dir=policy_dir,
        database_url=url,
        anthropic_api_key=API_KEY,
        base_url=fake_api.base_url,
        durability="os",
    )


@pytest.fixture
def conversation(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> Iterator[Conversation]:
    fake_api.script(
        Reply.tool_use(("toolu_01", "lookup_entity", LOOKUP)),
        Reply.ok("PARTY: ACME Shipping Ltd RESULT: CLEAR\nDECISION: RELEASE"),
    )
    with _gateway(policy_dir, sqlite_url, fake_api) as gw:
        first = gw.complete("sanctions_screening", QUESTION, caller=CALLER)
        assert first.tool_uses == (ToolUse("toolu_01", "lookup_entity", LOOKUP),)
        messages = [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": list(first.content)},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "[]"}],
            },
        ]
        second = gw.complete("sanctions_screening", messages=messages, caller=CALLER)
        assert not second.cached and second.tool_uses == ()
    yield Conversation(sqlite_url, first.request_id, second.request_id, first.tool_uses, messages)


def _replay(monkeypatch: pytest.MonkeyPatch, url: str, policy_dir: Path, *args: str) -> Result:
    monkeypatch.setenv("GATEWAY_DATABASE_URL", url)
    monkeypatch.setenv("GATEWAY_POLICY_DIR", str(policy_dir))
    monkeypatch.setenv("GATEWAY_DURABILITY", "os")
    return CliRunner().invoke(main, ["replay", *args], catch_exceptions=False)


def test_both_turns_of_a_tool_conversation_verify(
    conversation: Conversation, policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _replay(
        monkeypatch,
        conversation.url,
        policy_dir,
        "--verify",
        conversation.first,
        conversation.second,
    )
    assert result.exit_code == 0, result.output
    assert "verify: 2 request(s)" in result.stdout and "2 passed" in result.stdout


def test_a_repeated_tool_request_is_a_cache_hit_with_the_recorded_tool_calls(
    conversation: Conversation, policy_dir: Path, fake_api: FakeMessagesAPI
) -> None:
    sent = len(fake_api.requests)
    with _gateway(policy_dir, conversation.url, fake_api) as gw:
        again = gw.complete("sanctions_screening", QUESTION, caller=CALLER)
    assert again.cached
    assert again.tool_uses == conversation.first_tool_uses
    assert again.stop_reason == "tool_use"
    assert len(fake_api.requests) == sent  # nothing went upstream
    with AuditStore.open(conversation.url, "os") as store:
        (hit,) = [e for e in store.events_for_request(again.request_id)]
    assert hit.kind is EventKind.CACHE_HIT
    assert hit.data["served_request_id"] == conversation.first


def test_a_repeated_tool_result_turn_is_a_cache_hit_too(
    conversation: Conversation, policy_dir: Path, fake_api: FakeMessagesAPI
) -> None:
    sent = len(fake_api.requests)
    with _gateway(policy_dir, conversation.url, fake_api) as gw:
        again = gw.complete("sanctions_screening", messages=conversation.messages, caller=CALLER)
    assert again.cached and "RELEASE" in again.text
    assert len(fake_api.requests) == sent
