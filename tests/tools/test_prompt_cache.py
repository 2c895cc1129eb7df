"""Prompt caching: the policy marks its fixed prefix; callers mark blocks only where allowed."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.catalog import Catalog
from gateway.errors import InputError, PolicyViolation
from gateway.policy import Policy, plan_request
from tests.tools.conftest import LOOKUP, MakePolicy, model_of

CACHED = '\ncache = "1h"\n'  # appended under BASE's [prompt] table


def _plan(catalog: Catalog, policy: Policy, messages: list[dict[str, Any]]) -> Any:
    return plan_request(policy, model_of(catalog, policy), messages)


def _marked(ttl: str | None = None) -> list[dict[str, Any]]:
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl is not None:
        control["ttl"] = ttl
    block = {"type": "text", "text": "A long rulebook excerpt.", "cache_control": control}
    return [{"role": "user", "content": [block]}]


def test_the_system_prompt_is_marked_with_the_policy_ttl(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    body = _plan(catalog, make_policy(CACHED), [{"role": "user", "content": "q"}]).body
    assert body["system"] == [
        {
            "type": "text",
            "text": "Be careful.\n",
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]


def test_with_tools_one_breakpoint_after_the_system_prompt_caches_both(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy(CACHED + '\n[tools]\nfile = "tools/tools.json"\n', tools=[LOOKUP])
    body = _plan(catalog, policy, [{"role": "user", "content": "q"}]).body
    assert body["tools"] == [LOOKUP]  # the prefix is tools -> system: the system mark covers it
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_without_caching_the_system_prompt_stays_a_string(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    body = _plan(catalog, make_policy(), [{"role": "user", "content": "q"}]).body
    assert body["system"] == "Be careful.\n"


def test_the_cache_ttl_is_part_of_the_fingerprint(make_policy: MakePolicy) -> None:
    fingerprints = {make_policy(extra).fingerprint for extra in ("", CACHED, '\ncache = "5m"\n')}
    assert len(fingerprints) == 3


def test_caller_cache_control_is_refused_unless_allowed(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    with pytest.raises(PolicyViolation) as caught:
        _plan(catalog, make_policy(), _marked())
    assert caught.value.key == "input.cache_control"
    allowed = make_policy("\n[input]\ncache_control = true\n")
    assert _plan(catalog, allowed, _marked("1h")).body["messages"] == _marked("1h")


def test_a_1h_breakpoint_after_the_policy_5m_one_is_refused(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy('\ncache = "5m"\n[input]\ncache_control = true\n')
    _plan(catalog, policy, _marked("5m"))
    with pytest.raises(PolicyViolation, match="longer-lived") as caught:
        _plan(catalog, policy, _marked("1h"))
    assert caught.value.key == "input.cache_control"


def test_more_than_four_breakpoints_are_refused(make_policy: MakePolicy, catalog: Catalog) -> None:
    policy = make_policy(CACHED + "[input]\ncache_control = true\n")
    control = {"type": "ephemeral", "ttl": "1h"}
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": control} for i in range(4)]
    with pytest.raises(PolicyViolation, match="more than 4") as caught:
        _plan(catalog, policy, [{"role": "user", "content": blocks}])
    assert caught.value.key == "input.cache_control"


def test_a_malformed_cache_control_is_an_input_error(
    make_policy: MakePolicy, catalog: Catalog
) -> None:
    policy = make_policy("\n[input]\ncache_control = true\n")
    block = {"type": "text", "text": "x", "cache_control": {"type": "forever"}}
    with pytest.raises(InputError, match="ephemeral"):
        _plan(catalog, policy, [{"role": "user", "content": [block]}])
