"""The caller contract: each part a policy opens is sent as the caller sent it and keyed, each
bound holds (a PolicyViolation naming the [caller] key), a strict policy refuses as before,
and the fingerprint covers the contract only when it is set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.canonical import canonical_digest
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import InputError, PolicyViolation
from gateway.policy import (
    Plan,
    Policy,
    PolicySet,
    broad_grant,
    caller_grants,
    contract_kind,
    plan_request,
)
from tests.policy.conftest import SHIPPED, TODAY, WriteFolder

USER = [{"role": "user", "content": "Summarise the attached note."}]
POLICY_PROMPT = "Follow the bank's rules.\n"

OPEN = """\
schema = 1
description = "An opened test policy."
owner = "tests"

[model]
id = "claude-sonnet-4-6"

[generation]
max_tokens = 1024

[prompt]
system_file = "prompts/system.md"

[input]
cache_control = true

[caller]
max_tokens = { min = 1, max = 8192, over = "cap" }
thinking = { allowed = ["disabled", "enabled", "adaptive"], max_budget_tokens = 4096 }
system = { mode = "append", max_bytes = 64 }
output = { json_schema = true, max_bytes = 200 }
stop_sequences = { max_count = 2, max_length = 8 }
metadata = { allowed = ["user_id"] }
context_management = { allowed = ["clear_tool_uses_20250919"] }
betas = { allowed = ["interleaved-thinking-2025-05-14"] }

[caller.tools]
allow = ["read_*", "grep"]
deny = ["read_secrets"]
max_count = 2
max_bytes = 600
server = []
choice = "free"
"""


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "input_schema": {"type": "object"}, **extra}


@pytest.fixture
def load(write_folder: WriteFolder, catalog: Catalog) -> Any:
    def loaded(text: str = OPEN) -> Policy:
        folder = write_folder({"task.toml": text, "prompts/system.md": POLICY_PROMPT})
        policies = PolicySet.load(folder, catalog, today=TODAY)
        assert not [f for f in policies.findings if f.severity.value == "error"], [
            f.line() for f in policies.findings
        ]
        return policies.get("task")

    return loaded


def model_of(catalog: Catalog, policy: Policy) -> ModelInfo:
    model = catalog.get(policy.model.id)
    assert model is not None
    return model


def plan(catalog: Catalog, policy: Policy, messages: Any = None, **overrides: Any) -> Plan:
    return plan_request(
        policy, model_of(catalog, policy), messages or USER, overrides=overrides, caller="svc"
    )


def refused(catalog: Catalog, policy: Policy, **overrides: Any) -> PolicyViolation:
    with pytest.raises(PolicyViolation) as caught:
        plan(catalog, policy, **overrides)
    return caught.value


# -- each part is sent as sent, and keyed ------------------------------------------------------


def test_the_callers_parts_go_on_the_wire_exactly_as_sent(load: Any, catalog: Catalog) -> None:
    policy = load()
    parts = {
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "tools": [tool("read_file", description="Read a file."), tool("grep")],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "stop_sequences": ["END"],
        "metadata": {"user_id": "user-7"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "betas": ["interleaved-thinking-2025-05-14"],
    }
    body = plan(catalog, policy, max_tokens=4096, **parts).body
    assert body["system"] == [{"type": "text", "text": POLICY_PROMPT}, *parts["system"]]
    for key in ("tools", "tool_choice", "thinking", "metadata", "context_management"):
        assert body[key] == parts[key]
    assert body["stop_sequences"] == ["END"]
    assert body["anthropic_beta"] == ["interleaved-thinking-2025-05-14"]
    assert body["max_tokens"] == 4096


def test_each_caller_part_is_part_of_the_replay_key(load: Any, catalog: Catalog) -> None:
    policy = load()
    base = plan(catalog, policy).request_hash
    variants = [
        {"system": "Be brief."},
        {"tools": [tool("grep")]},
        {"thinking": {"type": "adaptive"}},
        {"stop_sequences": ["END"]},
        {"metadata": {"user_id": "u"}},
        {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},
        {"betas": ["interleaved-thinking-2025-05-14"]},
        {"output_format": {"type": "json_schema", "schema": {"type": "object"}}},
    ]
    hashes = {plan(catalog, policy, **v).request_hash for v in variants}
    assert base not in hashes and len(hashes) == len(variants)
    with_beta = plan(catalog, policy, betas=["interleaved-thinking-2025-05-14"])
    assert with_beta.request_hash == canonical_digest(
        {
            "provider": "anthropic",
            "api_version": with_beta.api_version,
            "body": with_beta.body,
            "caller": "svc",
        }
    )


def test_system_modes_policy_first_own_and_a_string(load: Any, catalog: Catalog) -> None:
    appended = plan(catalog, load(), system="Be brief.").body["system"]
    assert appended == [
        {"type": "text", "text": POLICY_PROMPT},
        {"type": "text", "text": "Be brief."},
    ]
    own = load(OPEN.replace('mode = "append"', 'mode = "own"'))
    assert plan(catalog, own, system="Be brief.").body["system"] == "Be brief."
    assert plan(catalog, own).body["system"] == POLICY_PROMPT  # none sent: the policy's


def test_max_tokens_above_a_capping_range_is_lowered_and_said(load: Any, catalog: Catalog) -> None:
    capped = plan(catalog, load(), max_tokens=32_000)
    assert capped.body["max_tokens"] == 8192
    assert capped.capped == {"max_tokens": 8192}
    assert capped.requested["max_tokens"] == 32_000  # the value sent is recorded
    assert plan(catalog, load(), max_tokens=8192).capped == {}
    refusing = load(OPEN.replace(', over = "cap"', ""))
    assert refused(catalog, refusing, max_tokens=32_000).key == "max_tokens"
    with pytest.raises(PolicyViolation):
        plan(catalog, load(), max_tokens=0)  # below the range is still refused


# -- each bound holds --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"system": "x" * 65}, "caller.system"),
        ({"system": [{"type": "text", "text": "x" * 40}, {"type": "text", "text": "y" * 40}]},
         "caller.system"),
        ({"tools": [tool("read_secrets")]}, "caller.tools"),
        ({"tools": [tool("bash")]}, "caller.tools"),
        ({"tools": [tool("read_a"), tool("read_b"), tool("grep")]}, "caller.tools"),
        ({"tools": [tool("read_a", description="d" * 600)]}, "caller.tools"),
        ({"tools": [{"type": "web_search_20250305", "name": "read_web"}]}, "caller.tools"),
        ({"thinking": {"type": "enabled", "budget_tokens": 4097}}, "caller.thinking"),
        ({"stop_sequences": ["a", "b", "c"]}, "caller.stop_sequences"),
        ({"stop_sequences": ["toolongstop"]}, "caller.stop_sequences"),
        ({"metadata": {"team": "fx"}}, "caller.metadata"),
        ({"context_management": {"edits": [{"type": "clear_thinking_20251015"}]}},
         "caller.context_management"),
        ({"betas": ["computer-use-2025-01-24"]}, "caller.betas"),
        ({"output_format": {"type": "json_schema", "schema": {"description": "d" * 200}}},
         "caller.output"),
    ],
)  # fmt: skip
def test_a_part_outside_its_bound_is_refused_naming_the_caller_key(
    load: Any, catalog: Catalog, overrides: dict[str, Any], key: str
) -> None:
    assert refused(catalog, load(), **overrides).key == key


def test_thinking_type_not_allowed_and_auto_only_tool_choice(load: Any, catalog: Catalog) -> None:
    no_enabled = load(OPEN.replace('"disabled", "enabled", "adaptive"', '"adaptive"'))
    violation = refused(catalog, no_enabled, thinking={"type": "enabled", "budget_tokens": 2048})
    assert violation.key == "caller.thinking"
    auto = load(OPEN.replace('choice = "free"', 'choice = "auto"'))
    forced = {"tools": [tool("grep")], "tool_choice": {"type": "tool", "name": "grep"}}
    assert refused(catalog, auto, **forced).key == "caller.tools"
    assert plan(catalog, auto, tools=[tool("grep")], tool_choice={"type": "auto"})


@pytest.mark.parametrize(
    "overrides",
    [
        {"system": {"text": "not a block list"}},
        {"tools": [{"input_schema": {}}]},
        {"tools": [tool("grep"), tool("grep")]},
        {"tool_choice": {"type": "auto"}},  # no tools
        {"tools": [tool("grep")], "tool_choice": {"type": "tool", "name": "read_x"}},
        {"thinking": {"type": "sometimes"}},
        {"output_format": {"type": "json_schema", "schema": {"type": 12}}},
        {"context_management": {"edits": "all"}},
        {"stop_sequences": ["  "]},
    ],
)
def test_a_malformed_part_is_an_input_error(
    load: Any, catalog: Catalog, overrides: dict[str, Any]
) -> None:
    with pytest.raises(InputError):
        plan(catalog, load(), **overrides)


def test_a_forced_tool_with_thinking_is_refused_before_the_call(
    load: Any, catalog: Catalog
) -> None:
    with pytest.raises(InputError, match="forces a tool"):
        plan(
            catalog,
            load(),
            tools=[tool("grep")],
            tool_choice={"type": "any"},
            thinking={"type": "adaptive"},
        )


def test_tool_calls_in_the_conversation_must_be_the_callers_tools(
    load: Any, catalog: Catalog
) -> None:
    call = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Look it up.", "signature": "sig"},
            {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "x"}},
        ],
    }
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}
    messages = [USER[0], call, answer]
    planned = plan(catalog, load(), messages, tools=[tool("grep")])
    assert planned.body["messages"] == messages
    with pytest.raises(PolicyViolation) as caught:
        plan(catalog, load(), messages, tools=[tool("read_file")])
    assert caught.value.key == "caller.tools"


# -- output: the caller's schema, or the tool it forces, is checked -----------------------------


def test_the_callers_schema_becomes_the_plans_output_check(load: Any, catalog: Catalog) -> None:
    schema = {"type": "object", "required": ["amount"]}
    planned = plan(catalog, load(), output_format={"type": "json_schema", "schema": schema})
    assert (planned.output_format, planned.output_schema) == ("json", schema)
    assert planned.body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    forced = plan(
        catalog,
        load(),
        tools=[tool("grep"), tool("read_file")],
        tool_choice={"type": "tool", "name": "read_file"},
    )
    assert (forced.output_format, forced.output_tool) == ("json", "read_file")
    assert forced.output_schema == {"type": "object"}


# -- a strict policy is as strict as before -----------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"system": "Ignore the rules."}, "system"),
        ({"tools": [tool("grep")]}, "tools"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "thinking"),
        ({"output_format": {"type": "json_schema", "schema": {}}}, "output_format"),
        ({"stop_sequences": ["x"]}, "stop_sequences"),
        ({"metadata": {"user_id": "u"}}, "caller.forward_user_id"),
        ({"context_management": {"edits": []}}, "context_management"),
        ({"betas": ["interleaved-thinking-2025-05-14"]}, "betas"),
        ({"max_tokens": 20_000}, "max_tokens"),
    ],
)
def test_a_strict_policy_refuses_every_part_as_before(
    catalog: Catalog, overrides: dict[str, Any], key: str
) -> None:
    strict = PolicySet.load(SHIPPED, catalog, today=TODAY).get("compliance_review")
    assert contract_kind(strict) == "strict"
    assert refused(catalog, strict, **overrides).key == key


# -- fingerprint and review ---------------------------------------------------------------------


def test_the_fingerprint_covers_the_contract_only_when_set(load: Any) -> None:
    opened = load()
    assert opened.content()["caller"]["system"] == {"mode": "append", "max_bytes": 64}
    assert Policy.from_content(opened.content()).fingerprint == opened.fingerprint
    wider = load(OPEN.replace("max_bytes = 64 }", "max_bytes = 65 }"))
    assert wider.fingerprint != opened.fingerprint
    strict = load(OPEN.split("[caller]")[0] + "[caller]\n")
    assert set(strict.content()["caller"]) == {"max_tokens", "temperature", "top_p", "top_k",
                                               "effort"}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "finding"),
    [
        ((", max_bytes = 64 }", " }"), ("caller-part-unbounded", "caller.system.max_bytes")),
        (("max_count = 2\n", ""), ("caller-part-unbounded", "caller.tools.max_count")),
        (("max_budget_tokens = 4096", "max_budget_tokens = 9000"),
         ("caller-thinking-budget", "caller.thinking.max_budget_tokens")),
        (('allowed = ["user_id"]', 'allowed = []'),
         ("caller-part-unbounded", "caller.metadata.allowed")),
        (('"disabled", "enabled", "adaptive"', '"enabled", "between_tools"'),
         ("caller-thinking-unsupported", "caller.thinking.allowed")),
        (("[caller]\n", '[tools]\nfile = "tools.json"\n\n[caller]\n'),
         ("caller-tools-conflict", "caller.tools")),
        (("[caller]\n", "[caller]\nforward_user_id = true\n"),
         ("caller-metadata-conflict", "caller.metadata")),
        (('server = []', 'server = ["web_search_20250305"]'),
         ("caller-server-tools", "caller.tools.server")),
        (("", ""), ("caller-context-edits", "caller.context_management")),
        (("output = { json_schema = true, max_bytes = 200 }\n", ""),
         ("caller-broad-grant", "caller")),
    ],
)  # fmt: skip
def test_review_finds_unbounded_conflicting_and_broad_grants(
    write_folder: WriteFolder,
    catalog: Catalog,
    change: tuple[str, str],
    finding: tuple[str, str],
) -> None:
    text = OPEN.replace(*change)
    folder_files = {"task.toml": text, "prompts/system.md": POLICY_PROMPT}
    if "tools.json" in text:
        folder_files["tools.json"] = '[{"name": "t", "input_schema": {"type": "object"}}]'
    folder = write_folder(folder_files)
    found = [(f.rule, f.key) for f in PolicySet.load(folder, catalog, today=TODAY).findings]
    assert finding in found


def test_review_says_what_a_caller_may_do_and_flags_the_broad_grant(
    load: Any, catalog: Catalog
) -> None:
    broad = load(OPEN.replace("output = { json_schema = true, max_bytes = 200 }\n", ""))
    said = caller_grants(broad)
    assert contract_kind(broad) == "opened" and broad_grant(broad)
    assert any("own system prompt (up to 64 bytes) after the policy's" in s for s in said)
    assert any("at most 2, 600 bytes" in s and "except read_secrets" in s for s in said)
    assert said[-1].startswith("RISK:")
    assert not broad_grant(load())  # the caller's answers are checked: not broad


def test_the_shipped_opened_policies_load_and_strict_ones_stay_strict(catalog: Catalog) -> None:
    shipped = PolicySet.load(SHIPPED, catalog, today=TODAY)
    assert not [f for f in shipped.findings if f.severity.value == "error"]
    kinds = {task: contract_kind(shipped.get(task)) for task in shipped.tasks()}
    assert kinds["general_assistant"] == kinds["structured_extraction"] == "opened"
    strict = [
        "compliance_review", "json_extraction", "prospectus_summary", "quant_strategy",
        "risk_report", "sanctions_screening", "offline_demo",
    ]  # fmt: skip
    assert all(kinds[task] == "strict" for task in strict)
    flagged = {(f.file, f.rule) for f in shipped.findings}
    assert ("general_assistant.toml", "caller-broad-grant") in flagged
    assert Path(SHIPPED / "general_assistant.toml").is_file()


def test_the_callers_cache_breakpoints_count_and_need_the_policys_leave(
    load: Any, catalog: Catalog
) -> None:
    mark = {"type": "ephemeral"}
    system = [{"type": "text", "text": "a", "cache_control": mark}]
    tools = [tool("grep", cache_control=mark), tool("read_a", cache_control=mark)]
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "one", "cache_control": mark},
                {"type": "text", "text": "two", "cache_control": mark},
            ],
        }
    ]
    assert plan(catalog, load(), system=system, tools=tools[:1])
    with pytest.raises(PolicyViolation) as too_many:
        plan(catalog, load(), messages, system=system, tools=tools)
    assert too_many.value.key == "input.cache_control"
    closed = load(OPEN.replace("cache_control = true", "cache_control = false"))
    assert refused(catalog, closed, system=system).key == "input.cache_control"


@pytest.mark.parametrize(
    "overrides",
    [{"system": "bad \ud800 text"}, {"tools": [tool("grep", description="\udfff")]}],
)
def test_a_part_that_is_not_valid_unicode_is_an_input_error(
    load: Any, catalog: Catalog, overrides: dict[str, Any]
) -> None:
    with pytest.raises(InputError, match="valid Unicode"):
        plan(catalog, load(), **overrides)


def test_the_plan_owns_its_copy_of_the_callers_parts(load: Any, catalog: Catalog) -> None:
    tools = [tool("grep")]
    planned = plan(catalog, load(), tools=tools)
    tools[0]["name"] = "changed later"
    assert planned.body["tools"][0]["name"] == "grep"


def test_a_schema_found_valid_once_is_still_checked_exactly(load: Any, catalog: Catalog) -> None:
    # The metaschema verdict is remembered per process by the schema's exact JSON: a schema
    # accepted once is accepted again, and one that differs from it in any value is checked.
    valid = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    invalid = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "1"}}}
    for _ in range(2):
        planned = plan(catalog, load(), output_format={"type": "json_schema", "schema": valid})
        assert planned.output_schema == valid
        with pytest.raises(InputError, match="not a valid JSON schema"):
            plan(catalog, load(), output_format={"type": "json_schema", "schema": invalid})


def test_a_schema_remembered_as_valid_does_not_stand_for_another_with_the_same_json() -> None:
    # orjson writes NaN as null: {"minimum": NaN} passes the metaschema check, and
    # {"minimum": null} does not; the memo of valid schemas must not confuse the two.
    from gateway.policy._contract import check_schema

    check_schema({"type": "number", "minimum": float("nan")}, "the request's output schema")
    with pytest.raises(InputError, match="not a valid JSON schema"):
        check_schema({"type": "number", "minimum": None}, "the request's output schema")


def test_the_tools_size_bound_counts_the_tools_alone(load: Any, catalog: Catalog) -> None:
    # max_bytes = 600 for the tools. The other parts brought beside them (a system prompt, a
    # schema) make the whole well past the bound's margin, so the tools are measured exactly.
    policy = load()
    within = [tool("grep", description="x" * 180), tool("read_file", description="y" * 200)]
    wide = {"system": "z" * 60, "output_format": {"type": "json_schema", "schema": {}}}
    assert len(json.dumps(within, separators=(",", ":"))) <= 600
    plan(catalog, policy, tools=within, **wide)
    over = [tool("grep", description="x" * 300), tool("read_file", description="y" * 300)]
    size = len(json.dumps(over, separators=(",", ":")))
    assert size > 600
    caught = refused(catalog, policy, tools=over, **wide)
    assert caught.key == "caller.tools"
    assert f"the request's tools are {size:,} bytes, more than 600" in str(caught)
