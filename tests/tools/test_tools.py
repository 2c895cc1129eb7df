"""Tools under policy: the definitions in the wire body, and tool blocks only for those tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.catalog import Catalog
from gateway.errors import InputError, PolicyViolation
from gateway.policy import Policy, PolicySet, plan_request
from gateway.result import ToolUse, answer_blocks
from tests.policy.conftest import TODAY
from tests.tools.conftest import LOOKUP, MakePolicy, model_of

TOOLS = '\n[tools]\nfile = "tools/tools.json"\n'
QUESTION = {"role": "user", "content": "Screen ACME Holdings Ltd."}
CALL = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Looking it up."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup_entity", "input": {"name": "ACME"}},
    ],
}
RESULT = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "No match."}],
}


def _plan(catalog: Catalog, policy: Policy, messages: list[dict[str, Any]]) -> Any:
    return plan_request(policy, model_of(catalog, policy), messages)


def test_declared_tools_go_into_the_body_with_the_choice(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy(TOOLS, tools=[LOOKUP])
    body = _plan(catalog, policy, [QUESTION]).body
    assert body["tools"] == [LOOKUP]
    assert body["tool_choice"] == {"type": "auto"}


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("any", {"type": "any"}),
        ("none", {"type": "none"}),
        ("lookup_entity", {"type": "tool", "name": "lookup_entity"}),
    ],
)
def test_tool_choice_keywords_and_a_named_tool(
    make_policy: MakePolicy, catalog: Catalog, choice: str, wire: dict[str, str]
) -> None:
    policy = make_policy(TOOLS + f'choice = "{choice}"\n', tools=[LOOKUP])
    assert _plan(catalog, policy, [QUESTION]).body["tool_choice"] == wire


def test_tools_are_part_of_the_fingerprint(make_policy: MakePolicy) -> None:
    plain = make_policy()
    with_tools = make_policy(TOOLS, tools=[LOOKUP])
    described = make_policy(TOOLS, tools=[{**LOOKUP, "description": "Another description."}])
    assert len({plain.fingerprint, with_tools.fingerprint, described.fingerprint}) == 3
    assert with_tools.content()["tools"] == [LOOKUP]
    assert Policy.from_content(with_tools.content()).fingerprint == with_tools.fingerprint


def test_a_policy_without_tools_keeps_its_content_keys(make_policy: MakePolicy) -> None:
    content = make_policy().content()
    assert not {"tools", "tool_choice", "server_tools", "input", "prompt_cache"} & set(content)


def test_a_two_turn_tool_conversation_is_accepted(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy(TOOLS, tools=[LOOKUP])
    messages = [QUESTION, CALL, RESULT]
    assert _plan(catalog, policy, messages).body["messages"] == messages


def test_a_call_of_an_undeclared_tool_is_a_violation(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy(TOOLS, tools=[LOOKUP])
    call = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "wire_money", "input": {}}],
    }
    with pytest.raises(PolicyViolation, match="wire_money") as caught:
        _plan(catalog, policy, [QUESTION, call, RESULT])
    assert caught.value.key == "tools.file"


def test_a_tool_result_without_its_call_is_a_violation(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy(TOOLS, tools=[LOOKUP])
    with pytest.raises(PolicyViolation, match="answers no tool call") as caught:
        _plan(catalog, policy, [QUESTION, {"role": "assistant", "content": "ok"}, RESULT])
    assert caught.value.key == "tools.file"


def test_tool_blocks_on_a_policy_without_tools_are_violations(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy()
    with pytest.raises(PolicyViolation) as caught:
        _plan(catalog, policy, [QUESTION, CALL, RESULT])
    assert caught.value.key == "tools.file"


def test_tool_blocks_in_the_wrong_turn_are_input_errors(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy(TOOLS, tools=[LOOKUP])
    with pytest.raises(InputError, match="user turn"):
        _plan(catalog, policy, [{"role": "user", "content": CALL["content"]}])


def test_an_allowed_server_tool_loads_and_is_sent(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    policy = make_policy(TOOLS + 'server = ["web_search_20250305"]\n', tools=[LOOKUP, search])
    assert _plan(catalog, policy, [QUESTION]).body["tools"] == [LOOKUP, search]


def test_a_forced_choice_on_a_model_that_refuses_it_does_not_load(
    tmp_path: Path, catalog: Catalog
) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "t.json").write_text(json.dumps([LOOKUP]))
    (tmp_path / "t.toml").write_text(
        'schema = 1\ndescription = "d"\nowner = "o"\n[model]\nid = "claude-opus-5-5"\n'
        '[generation]\nmax_tokens = 1024\n[tools]\nfile = "tools/t.json"\nchoice = "any"\n'
    )
    entry = PolicySet.load(tmp_path, catalog, today=TODAY).entry("t")
    assert entry is not None and entry.policy is None
    assert [f.rule for f in entry.findings] == ["tool-choice-forced-with-thinking"]


def test_answer_blocks_expose_the_tool_calls() -> None:
    response = {"content": [*CALL["content"], "junk", {"type": "tool_use", "id": 3}]}
    blocks, uses = answer_blocks(response)
    assert len(blocks) == 3
    assert uses == (ToolUse(id="toolu_1", name="lookup_entity", input={"name": "ACME"}),)
