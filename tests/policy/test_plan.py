"""Planning: the exact wire body per model family, caller overrides, input checks."""

from __future__ import annotations

from typing import Any

import pytest

from audit.canonical import canonical_digest
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import InputError, PolicyLoadError, PolicyViolation
from gateway.policy import Policy, PolicySet, plan_request
from tests.policy.conftest import SHIPPED, TODAY

USER = [{"role": "user", "content": "Transaction 42: EUR 9,900 to a new counterparty."}]


@pytest.fixture(scope="module")
def shipped(catalog: Catalog) -> PolicySet:
    return PolicySet.load(SHIPPED, catalog, today=TODAY)


def _model(catalog: Catalog, model_id: str) -> ModelInfo:
    model = catalog.get(model_id)
    assert model is not None
    return model


def _plan(shipped: PolicySet, catalog: Catalog, task: str, **kwargs: Any) -> Any:
    policy = shipped.get(task)
    return plan_request(policy, _model(catalog, policy.model.id), USER, **kwargs)


def test_sampling_model_body_carries_temperature_on_the_old_api(
    shipped: PolicySet, catalog: Catalog
) -> None:
    plan = _plan(shipped, catalog, "compliance_review")
    policy = shipped.get("compliance_review")
    assert plan.api_version == "2023-06-01"
    assert plan.provider == "anthropic"
    assert plan.body == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 2048,
        "messages": USER,
        "system": policy.prompt.system,
        "stop_sequences": ["</reasons>"],
        "temperature": 0.0,
    }
    assert plan.cache_mode == "replay"
    assert plan.policy_fingerprint == policy.fingerprint
    assert plan.request_hash == canonical_digest(
        {"provider": "anthropic", "api_version": "2023-06-01", "body": plan.body}
    )


def test_current_model_body_has_no_sampling_and_sends_effort(
    shipped: PolicySet, catalog: Catalog
) -> None:
    plan = _plan(shipped, catalog, "risk_report")
    assert plan.api_version == "2026-10-21"
    assert plan.body == {
        "model": "claude-opus-5-5",
        "max_tokens": 8192,
        "messages": USER,
        "system": shipped.get("risk_report").prompt.system,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    }
    assert not {"temperature", "top_p", "top_k"} & set(plan.body)


def test_json_task_gets_a_json_schema_output_format(shipped: PolicySet, catalog: Catalog) -> None:
    plan = _plan(shipped, catalog, "json_extraction")
    schema = shipped.get("json_extraction").output.json_schema
    assert schema is not None
    assert plan.body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert plan.output_format == "json"
    assert plan.output_schema == schema


def test_local_model_body_carries_every_sampling_parameter(
    shipped: PolicySet, catalog: Catalog
) -> None:
    plan = _plan(shipped, catalog, "offline_demo")
    assert plan.provider == "local"
    assert plan.api_version == "local-1"
    assert plan.body["model"] == "local:ngram"
    assert (plan.body["temperature"], plan.body["top_k"]) == (0.7, 40)


def test_allowed_override_is_applied_and_recorded(shipped: PolicySet, catalog: Catalog) -> None:
    plan = _plan(shipped, catalog, "quant_strategy", overrides={"temperature": 1})
    assert plan.body["temperature"] == 1
    assert plan.requested == {"temperature": 1}
    assert plan.effective["temperature"] == 1
    assert plan.effective["max_tokens"] == 4096


def test_zero_and_zero_point_zero_hash_the_same(shipped: PolicySet, catalog: Catalog) -> None:
    as_int = _plan(shipped, catalog, "offline_demo", overrides={"temperature": 0})
    as_float = _plan(shipped, catalog, "offline_demo", overrides={"temperature": 0.0})
    assert as_int.request_hash == as_float.request_hash


def test_any_change_changes_the_request_hash(shipped: PolicySet, catalog: Catalog) -> None:
    base = _plan(shipped, catalog, "offline_demo")
    hotter = _plan(shipped, catalog, "offline_demo", overrides={"temperature": 0.71})
    policy = shipped.get("offline_demo")
    other_text = plan_request(
        policy, _model(catalog, "local:ngram"), [{"role": "user", "content": "other"}]
    )
    assert len({base.request_hash, hotter.request_hash, other_text.request_hash}) == 3


@pytest.mark.parametrize(
    ("task", "overrides", "key", "says"),
    [
        ("quant_strategy", {"temperature": 0.2}, "temperature", "0.5 <= temperature <= 1"),
        ("quant_strategy", {"temperature": 1.01}, "temperature", "0.5 <= temperature <= 1"),
        ("quant_strategy", {"top_p": 0.9}, "top_p", "callers may set"),
        ("compliance_review", {"temperature": 0.5}, "temperature", "does not let callers"),
        ("compliance_review", {"max_tokens": 5000}, "max_tokens", "256 <= max_tokens <= 4096"),
        ("compliance_review", {"max_tokens": 300.5}, "max_tokens", "256 <= max_tokens <= 4096"),
        ("compliance_review", {"max_tokens": True}, "max_tokens", "max_tokens"),
        ("offline_demo", {"top_k": "40"}, "top_k", "top_k <= 100"),
        ("risk_report", {"effort": "max"}, "effort", "['medium', 'high']"),
    ],
)
def test_forbidden_override_raises_policy_violation_naming_the_key(
    shipped: PolicySet,
    catalog: Catalog,
    task: str,
    overrides: dict[str, object],
    key: str,
    says: str,
) -> None:
    with pytest.raises(PolicyViolation) as caught:
        _plan(shipped, catalog, task, overrides=overrides)
    assert caught.value.key == key
    assert says in str(caught.value)


def test_override_that_breaks_a_model_rule_is_a_violation(
    write_folder: Any, catalog: Catalog
) -> None:
    folder = write_folder(
        {
            "think.toml": """\
schema = 1
description = "thinking with a caller-chosen max_tokens"
owner = "tests"
[model]
id = "claude-sonnet-4-6"
[generation]
max_tokens = 8192
thinking = { type = "enabled", budget_tokens = 4096 }
[caller]
max_tokens = { min = 1, max = 8192 }
"""
        }
    )
    policy = PolicySet.load(folder, catalog, today=TODAY).get("think")
    with pytest.raises(PolicyViolation) as caught:
        plan_request(policy, _model(catalog, policy.model.id), USER, overrides={"max_tokens": 2000})
    assert caught.value.key == "max_tokens"
    assert "budget_tokens" in str(caught.value)


def test_replanning_under_a_model_that_cannot_honour_the_policy_is_refused(
    shipped: PolicySet, catalog: Catalog
) -> None:
    policy = shipped.get("compliance_review")  # temperature 0.0
    with pytest.raises(PolicyLoadError) as caught:
        plan_request(policy, _model(catalog, "claude-opus-5-5"), USER)
    assert [f.rule for f in caught.value.findings] == ["sampling-unsupported"]


def test_replanning_under_another_capable_model_changes_only_what_it_must(
    shipped: PolicySet, catalog: Catalog
) -> None:
    policy = shipped.get("compliance_review")
    plan = plan_request(policy, _model(catalog, "claude-opus-4-6"), USER)
    assert plan.body["model"] == "claude-opus-4-6"
    assert plan.body["temperature"] == 0.0


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ([], "no messages"),
        ([{"role": "user", "content": "   "}], "empty"),
        ([{"role": "assistant", "content": "hi"}], "first message"),
        ([{"role": "system", "content": "hi"}], "role"),
        ([{"role": "user"}], "malformed"),
        ([{"role": "user", "content": "a", "name": "x"}], "malformed"),
        (["just a string"], "malformed"),
        ([{"role": "user", "content": [{"type": "image", "source": {}}]}], "not plain text"),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "not plain text"),
        ([{"role": "user", "content": []}], "no text"),
        ([{"role": "user", "content": 42}], "no text"),
    ],
)
def test_unusable_messages_are_input_errors(
    shipped: PolicySet, catalog: Catalog, messages: Any, says: str
) -> None:
    policy = shipped.get("compliance_review")
    with pytest.raises(InputError, match=says):
        plan_request(policy, _model(catalog, policy.model.id), messages)


def test_text_blocks_and_conversations_are_accepted(shipped: PolicySet, catalog: Catalog) -> None:
    policy = shipped.get("compliance_review")
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "second"},
    ]
    plan = plan_request(policy, _model(catalog, policy.model.id), messages)
    assert plan.body["messages"] == messages


def test_input_obviously_over_the_context_window_is_refused(
    shipped: PolicySet, catalog: Catalog
) -> None:
    policy: Policy = shipped.get("offline_demo")
    small = _model(catalog, "local:ngram").model_copy(update={"context_window": 100})
    fits = [{"role": "user", "content": "x" * 200}]  # ~50 tokens plus the system prompt
    plan_request(policy, small, fits)
    with pytest.raises(InputError, match="more than the 100 tokens"):
        plan_request(policy, small, [{"role": "user", "content": "é" * 300}])  # 600 bytes
