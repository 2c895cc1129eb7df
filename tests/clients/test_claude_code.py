"""Claude Code (`@anthropic-ai/claude-code` from npm) as `claude -p` through `gateway serve`:
a one-step task that runs one of its own tools (Bash) against the fake, which answers with a
`tool_use` and then text. Every turn is in the audit log under the caller key's name, and the
log verifies. The strict policy refuses Claude Code's request with a 400 naming the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.installs import NodeClient
from tests.clients.runner import caller_key, claude_env, run_claude
from tests.clients.verdicts import POLICY_KEY, requests_of
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` and `claude` as processes

TASK = "Run `echo hello-from-tool` with the Bash tool and tell me what it printed."
BASH = {"command": "echo hello-from-tool", "description": "Print a greeting"}


@pytest.mark.parametrize(
    "model_args",
    [(), ("--model", "claude-sonnet-4-6")],
    ids=["its-default-model", "claude-sonnet-4-6"],
)
def test_claude_code_completes_a_task_with_its_own_tool_and_every_turn_is_recorded(
    gateway: ServerProcess,
    fake: FakeMessagesAPI,
    claude_code: NodeClient,
    tmp_path: Path,
    model_args: tuple[str, ...],
) -> None:
    caller = "coding-agents-sonnet" if model_args else "coding-agents"
    key = caller_key(gateway, caller)  # routed to coding_agent (conftest.ROUTED)
    fake.script(
        Reply.tool_use(("toolu_cc", "Bash", BASH)),
        Reply.ok(text="It printed hello-from-tool."),
    )
    before = len(fake.requests)
    (tmp_path / "home").mkdir()
    env = claude_env(gateway, key, tmp_path / "home")
    result = run_claude(claude_code, TASK, env, tmp_path, "--allowedTools", "Bash", *model_args)
    assert result["is_error"] is False, result
    assert result["result"] == "It printed hello-from-tool." and result["num_turns"] == 2
    turns = [r.json for r in fake.requests[before:]]
    assert len(turns) == 2
    # The second turn carries what Claude Code's own Bash tool printed.
    tool_result = turns[1]["messages"][-1]["content"][0]  # type: ignore[index]
    assert tool_result["type"] == "tool_result" and "hello-from-tool" in str(tool_result)
    events = requests_of(gateway, caller)
    assert [str(e.kind) for e in events] == ["request", "response", "request", "response"]
    # The evidence says what the agent brought and under which contract it ran.
    show = gateway.cli("audit", "show", str(events[0].request_id), "--format", "json")
    shown = json.loads(show.stdout)
    assert shown["coverage"]["contract"] == "opened"
    assert {"system prompt", "tools", "thinking", "metadata", "betas"} <= set(
        shown["coverage"]["caller_supplied"]
    )
    assert gateway.verify().returncode == 0


def test_the_strict_policy_refuses_claude_code_naming_the_policy(
    gateway: ServerProcess, fake: FakeMessagesAPI, claude_code: NodeClient, tmp_path: Path
) -> None:
    key = caller_key(gateway, "coding-agents-strict")
    before = len(fake.requests)
    (tmp_path / "home").mkdir()
    env = claude_env(gateway, key, tmp_path / "home")
    result = run_claude(claude_code, TASK, env, tmp_path, "--model", "compliance_review")
    assert result["is_error"] is True and result.get("api_error_status") == 400, result
    assert "compliance_review" in result["result"] and POLICY_KEY.search(result["result"])
    assert len(fake.requests) == before
