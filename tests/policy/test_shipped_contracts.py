"""The shipped opened policies admit what real clients send (shapes as captured from Claude Code
2.1, langchain-anthropic 1.7 and pydantic-ai 2.68, see docs/clients.md), and a strict policy
refuses each of the same requests naming the policy key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.catalog import Catalog
from gateway.errors import PolicyViolation
from gateway.policy import Plan, PolicySet, plan_request
from tests.policy.conftest import SHIPPED, TODAY

EPHEMERAL = {"type": "ephemeral"}
CLAUDE_CODE_BETAS = [
    "claude-code-20250219",
    "context-1m-2025-08-07",
    "interleaved-thinking-2025-05-14",
    "thinking-token-count-2026-05-13",
    "context-management-2025-06-27",
    "prompt-caching-scope-2026-01-05",
    "mid-conversation-system-2026-04-07",
    "effort-2025-11-24",
]
CLAUDE_CODE_TOOL_NAMES = [
    "Agent", "Bash", "CronCreate", "CronDelete", "CronList", "DesignSync", "Edit",
    "EnterWorktree", "ExitWorktree", "NotebookEdit", "Read", "ReportFindings", "ScheduleWakeup",
    "SendMessage", "Skill", "TaskCreate", "TaskGet", "TaskList", "TaskOutput", "TaskStop",
    "TaskUpdate", "WebFetch", "WebSearch", "Workflow", "Write",
]  # fmt: skip


def claude_code_request() -> dict[str, Any]:
    """Claude Code `claude -p` with --model claude-opus-4-8: its second turn (tool result)."""
    tools = [
        {
            "name": name,
            "description": f"{name}: " + "Use this tool when the task needs it. " * 90,
            "input_schema": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "x" * 200}},
                "required": ["command"],
                "additionalProperties": False,
                "$schema": "http://json-schema.org/draft-07/schema#",
            },
        }
        for name in CLAUDE_CODE_TOOL_NAMES
    ]
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.0cf; "
         "cc_entrypoint=sdk-cli;"},
        {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK.",
         "cache_control": EPHEMERAL},
        {"type": "text", "text": "You are an agent. " * 1500, "cache_control": EPHEMERAL},
    ]  # fmt: skip
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>Today is 2026-12-02.</system-reminder>"},
                {"type": "text", "text": "Run echo hello with Bash", "cache_control": EPHEMERAL},
            ],
        },
        {"role": "system", "content": "Available agent types: general-purpose, Explore."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Run it.", "signature": "EqQBCkYIBxgCKkA"},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "Bash",
                    "input": {"command": "echo hello", "description": "echo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "hello",
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]
    overrides = {
        "max_tokens": 64000,
        "system": system,
        "tools": tools,
        "thinking": {"type": "adaptive"},
        "effort": "high",
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {
            "user_id": json.dumps(
                {"device_id": "d" * 64, "account_uuid": "", "session_id": "s" * 36}
            )
        },
        "betas": CLAUDE_CODE_BETAS,
    }
    return {"messages": messages, "overrides": overrides}


LANGCHAIN_SCHEMA = {
    "type": "object",
    "title": "Person",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
USER = [{"role": "user", "content": "Jane Roe, 41, joined in 2019."}]


def langchain_system_message() -> dict[str, Any]:
    return {
        "messages": USER,
        "overrides": {"max_tokens": 128000, "system": "You answer in one sentence."},
    }


def langchain_structured_default() -> dict[str, Any]:
    tool = {"name": "Person", "description": "A person.", "input_schema": LANGCHAIN_SCHEMA}
    return {
        "messages": USER,
        "overrides": {
            "max_tokens": 4096,
            "tools": [tool],
            "tool_choice": {"type": "tool", "name": "Person"},
        },
    }


def langchain_structured_json_schema() -> dict[str, Any]:
    return {
        "messages": USER,
        "overrides": {
            "max_tokens": 64000,
            "output_format": {"type": "json_schema", "schema": LANGCHAIN_SCHEMA},
        },
    }


def pydantic_ai_output_type() -> dict[str, Any]:
    final = {
        "name": "final_result",
        "description": "The final response which ends this conversation",
        "input_schema": LANGCHAIN_SCHEMA,
    }
    return {
        "messages": [{"role": "user", "content": [{"type": "text", "text": USER[0]["content"]}]}],
        "overrides": {
            "max_tokens": 16384,
            "system": [
                {"type": "text", "text": "Mid-conversation system messages ..." * 30},
                {"type": "text", "text": "Extract the person."},
            ],
            "tools": [final],
            "tool_choice": {"type": "any"},
        },
    }


def pydantic_ai_tool() -> dict[str, Any]:
    lookup = {
        "name": "lookup_rate",
        "description": "Look up an FX rate.",
        "input_schema": {"type": "object", "properties": {"pair": {"type": "string"}}},
    }
    return {
        "messages": USER,
        "overrides": {"max_tokens": 16384, "tools": [lookup], "tool_choice": {"type": "auto"}},
    }


@pytest.fixture(scope="module")
def shipped(catalog: Catalog) -> PolicySet:
    return PolicySet.load(SHIPPED, catalog, today=TODAY)


def plan(shipped: PolicySet, catalog: Catalog, task: str, request: dict[str, Any]) -> Plan:
    policy = shipped.get(task)
    model = catalog.get(policy.model.id)
    assert model is not None
    return plan_request(
        policy, model, request["messages"], overrides=request["overrides"], caller="dev"
    )


def test_claude_code_is_admitted_by_coding_agent_as_sent(
    shipped: PolicySet, catalog: Catalog
) -> None:
    request = claude_code_request()
    assert len(json.dumps(request["overrides"]["tools"])) > 90_000  # about Claude Code's size
    planned = plan(shipped, catalog, "coding_agent", request)
    body, sent = planned.body, request["overrides"]
    assert body["system"] == sent["system"] and body["tools"] == sent["tools"]
    assert body["messages"] == request["messages"]
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "high"}
    assert body["context_management"] == sent["context_management"]
    assert body["metadata"] == sent["metadata"]
    assert body["anthropic_beta"] == CLAUDE_CODE_BETAS
    assert body["max_tokens"] == 64000 and planned.capped == {}
    assert planned.requested == sent


@pytest.mark.parametrize(
    ("task", "request_of"),
    [
        ("general_assistant", langchain_system_message),
        ("general_assistant", pydantic_ai_tool),
        ("general_assistant", pydantic_ai_output_type),
        ("general_assistant", langchain_structured_default),
        ("structured_extraction", langchain_structured_default),
        ("structured_extraction", langchain_structured_json_schema),
        ("structured_extraction", pydantic_ai_output_type),
        ("structured_extraction", langchain_system_message),
    ],
)
def test_framework_requests_are_admitted_with_max_tokens_capped(
    shipped: PolicySet, catalog: Catalog, task: str, request_of: Any
) -> None:
    request = request_of()
    planned = plan(shipped, catalog, task, request)
    ceiling = shipped.get(task).caller.max_tokens
    assert ceiling is not None and ceiling.max is not None
    asked = request["overrides"]["max_tokens"]
    assert planned.body["max_tokens"] == min(asked, int(ceiling.max))
    assert planned.capped == ({"max_tokens": int(ceiling.max)} if asked > ceiling.max else {})


@pytest.mark.parametrize(
    "request_of",
    [langchain_structured_default, langchain_structured_json_schema, pydantic_ai_output_type],
)
def test_structured_extraction_checks_each_frameworks_output(
    shipped: PolicySet, catalog: Catalog, request_of: Any
) -> None:
    planned = plan(shipped, catalog, "structured_extraction", request_of())
    assert planned.output_format == "json" and planned.output_schema == LANGCHAIN_SCHEMA


@pytest.mark.parametrize(
    ("request_of", "key"),
    [
        (claude_code_request, "system"),
        (langchain_system_message, "system"),
        (langchain_structured_default, "tools"),
        (langchain_structured_json_schema, "output_format"),
        (pydantic_ai_output_type, "system"),
        (pydantic_ai_tool, "tools"),
    ],
)
def test_a_strict_policy_refuses_each_client_request_naming_the_key(
    shipped: PolicySet, catalog: Catalog, request_of: Any, key: str
) -> None:
    request = request_of()
    request["overrides"]["max_tokens"] = 2048  # within compliance_review's own range
    with pytest.raises(PolicyViolation) as refused:
        plan(shipped, catalog, "compliance_review", request)
    assert refused.value.key == key
