"""Loading a folder: the shipped policies pass review; lookups fail with clear errors."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

import gateway.policy
from gateway.catalog import Catalog
from gateway.cli._boundary import exit_code_for
from gateway.errors import PolicyLoadError, UnknownTask
from gateway.policy import PolicySet, review_policies
from tests.policy.conftest import BROKEN, SHIPPED, TODAY, VALID, WriteFolder


def test_shipped_policies_pass_review_with_only_their_grants_flagged(catalog: Catalog) -> None:
    # The strict policies have no findings; the opened ones carry exactly the risk notes of
    # what they grant (a coding agent and an assistant are broad grants by design).
    report = review_policies(SHIPPED, catalog, today=TODAY)
    assert sorted((f.severity.value, f.file, f.rule) for f in report.findings) == [
        ("warning", "coding_agent.toml", "caller-broad-grant"),
        ("warning", "coding_agent.toml", "caller-context-edits"),
        ("warning", "general_assistant.toml", "caller-broad-grant"),
    ]
    assert report.ok


def test_shipped_policies_cover_the_required_tasks(catalog: Catalog) -> None:
    policies = {p.task: p for p in PolicySet.load(SHIPPED, catalog, today=TODAY).policies()}
    assert {"compliance_review", "quant_strategy", "risk_report", "json_extraction"} <= set(
        policies
    )
    review = policies["compliance_review"]
    assert (review.reproducible, review.cache.mode, review.generation.temperature) == (
        True,
        "replay",
        0.0,
    )
    quant = policies["quant_strategy"]
    assert quant.cache.mode == "record"
    assert quant.generation.temperature == pytest.approx(0.8)
    assert policies["json_extraction"].output.json_schema is not None
    current = [
        p
        for p in policies.values()
        if (m := catalog.get(p.model.id)) is not None
        and m.sampling == "none"
        and p.generation.effort is not None
        and p.cache.mode == "replay"
    ]
    assert current, "one task must run on a current model with effort and replay"
    assert all(p.prompt.system for p in policies.values())


def test_unknown_task_lists_the_known_ones(catalog: Catalog) -> None:
    policies = PolicySet.load(SHIPPED, catalog, today=TODAY)
    with pytest.raises(UnknownTask) as caught:
        policies.get("no_such_task")
    assert "compliance_review" in str(caught.value)
    assert exit_code_for(caught.value) == 2


def test_a_broken_task_raises_policy_load_error_with_its_findings(test_catalog: Catalog) -> None:
    policies = PolicySet.load(BROKEN, test_catalog, today=TODAY)
    with pytest.raises(PolicyLoadError) as caught:
        policies.get("sampling_unsupported")
    assert [f.rule for f in caught.value.findings] == ["sampling-unsupported"]
    assert "generation.temperature" in str(caught.value)


def test_a_warning_does_not_stop_a_policy_loading(test_catalog: Catalog) -> None:
    policies = PolicySet.load(BROKEN, test_catalog, today=TODAY)
    assert policies.get("model_retiring").model.id == "claude-opus-4-5-20251101"


RETIRING_OVERRIDE = """\
schema = 1
[models."test-retiring"]
provider = "anthropic"
pinned = true
api_version = "2023-06-01"
sampling = "temperature-or-top-p"
top_k = true
max_output_tokens = 64000
context_window = 200000
lifecycle = "active"
retires_at = 2027-03-01
"""


def test_retiring_warning_starts_90_days_before_retirement(
    write_folder: WriteFolder, tmp_path: Path
) -> None:
    override = tmp_path / "retiring.toml"
    override.write_text(RETIRING_OVERRIDE)
    catalog = Catalog.load(override)
    text = VALID.replace("claude-sonnet-4-6", "test-retiring")
    folder = write_folder({"task.toml": text, "prompts/system.md": "x\n"})
    day_91_before = PolicySet.load(folder, catalog, today=date(2026, 11, 30)).findings
    day_90_before = PolicySet.load(folder, catalog, today=date(2026, 12, 1)).findings
    assert [f.rule for f in day_91_before] == []
    assert [(f.rule, f.severity.value) for f in day_90_before] == [("model-retiring", "warning")]


def test_a_missing_folder_is_a_usage_error(tmp_path: Path, catalog: Catalog) -> None:
    with pytest.raises(PolicyLoadError, match="does not exist") as caught:
        PolicySet.load(tmp_path / "nope", catalog)
    assert exit_code_for(caught.value) == 2


def test_public_names_are_pinned() -> None:
    assert set(gateway.policy.__all__) == {
        "FIELDS",
        "PLACEHOLDER_INPUT",
        "PolicyField",
        "Shown",
        "field_rows",
        "Caller",
        "CallerChoice",
        "CallerRange",
        "FieldChange",
        "Finding",
        "Generation",
        "Plan",
        "Policy",
        "PolicyEntry",
        "PolicySet",
        "ROUTES_FILE",
        "ROUTES_TASK",
        "ANY",
        "Route",
        "RouteTable",
        "ReviewReport",
        "Severity",
        "TaskDiff",
        "Thinking",
        "diff_policies",
        "diff_policy_sets",
        "TARGET_SYNTAX",
        "ModelTarget",
        "parse_model_target",
        "chosen_model",
        "caller_parts",
        "contract_of",
        "opened_keys",
        "plan_request",
        "planning_day",
        "IN_BODY",
        "CONTENT_OVERRIDES",
        "in_body_overrides",
        "review_policies",
        "task_names",
        "transported",
        "broad_grant",
        "caller_grants",
        "contract_kind",
        "Minimum",
        "RetentionTable",
        "minimum_days",
    }


def test_task_names_are_the_tasks_a_loaded_folder_names(tmp_path: Path, catalog: Catalog) -> None:
    # `audit list` names the known tasks from the folder alone, without loading a policy: the
    # same names PolicySet.load gives, a task whose file does not load included.
    assert gateway.policy.task_names(SHIPPED) == PolicySet.load(SHIPPED, catalog).tasks()
    (tmp_path / "broken_task.toml").write_text("not toml [", encoding="utf-8")
    (tmp_path / "routes.toml").write_text("", encoding="utf-8")
    loaded = PolicySet.load(tmp_path, catalog).tasks()
    assert gateway.policy.task_names(tmp_path) == loaded == ["broken_task"]
    assert gateway.policy.task_names(tmp_path / "nope") == []


def test_an_error_message_quotes_settings_never_content() -> None:
    from gateway.policy._requested import shown_override

    assert shown_override("temperature", 0.5) == "0.5"
    assert shown_override("system", "Client Jane Roe") == "<str>"
    assert shown_override("tools", [{"name": "t"}]) == "<list>"
