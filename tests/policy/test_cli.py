"""`gateway policy ...` and `gateway models list` through the real CLI and its error boundary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.catalog import Catalog
from gateway.cli import main
from gateway.policy import PolicySet
from tests.policy.conftest import BROKEN, SHIPPED, TEST_CATALOG_OVERRIDE, VALID, WriteFolder


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for var in ("GATEWAY_POLICY_DIR", "GATEWAY_CATALOG_OVERRIDE"):
        monkeypatch.delenv(var, raising=False)
    return CliRunner()


def test_review_of_shipped_policies_prints_the_table_and_exits_0(runner: CliRunner) -> None:
    result = runner.invoke(main, ["policy", "review", str(SHIPPED)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if line.startswith("TASK"))
    assert "MODEL" in header and "MANDATED" in header
    row = next(line for line in lines if line.startswith("compliance_review"))
    assert "claude-sonnet-4-6" in row and "temperature=0.0" in row and row.endswith("ok")
    assert "No findings" in result.output


def test_review_uses_gateway_policy_dir_by_default(runner: CliRunner) -> None:
    result = runner.invoke(main, ["policy", "review"], env={"GATEWAY_POLICY_DIR": str(SHIPPED)})
    assert result.exit_code == 0, result.output
    assert "risk_report" in result.output


def test_review_of_broken_policies_exits_1_and_explains(runner: CliRunner) -> None:
    env = {"GATEWAY_CATALOG_OVERRIDE": str(TEST_CATALOG_OVERRIDE)}
    result = runner.invoke(main, ["policy", "review", str(BROKEN)], env=env)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "sampling_unsupported.toml  [generation.temperature]  (sampling-unsupported)" in (
        result.output
    )
    assert "What to do:" in result.output


def test_review_json_lists_tasks_and_findings(runner: CliRunner) -> None:
    env = {"GATEWAY_CATALOG_OVERRIDE": str(TEST_CATALOG_OVERRIDE)}
    result = runner.invoke(main, ["policy", "review", str(BROKEN), "--format", "json"], env=env)
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["ok"] is False
    rules = {(f["file"], f["rule"]) for f in data["findings"]}
    assert ("model_alias.toml", "model-alias") in rules
    assert {t["task"] for t in data["tasks"]} >= {"model_alias", "thinking_top_p"}


def test_review_of_a_missing_folder_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(main, ["policy", "review", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_show_json_has_fingerprint_and_request_template(runner: CliRunner) -> None:
    args = ["policy", "show", "compliance_review", "--policy-dir", str(SHIPPED)]
    result = runner.invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    policy = PolicySet.load(SHIPPED, Catalog.load()).get("compliance_review")
    assert data["fingerprint"] == policy.fingerprint
    template = data["request_template"]
    assert template["api_version"] == "2023-06-01"
    assert template["body"]["temperature"] == 0.0
    assert template["body"]["messages"] == [{"role": "user", "content": "<user input>"}]
    assert data["system_prompt_digest"].startswith("sha256:")


def test_show_text_prints_settings_and_body(runner: CliRunner) -> None:
    result = runner.invoke(
        main, ["policy", "show", "risk_report"], env={"GATEWAY_POLICY_DIR": str(SHIPPED)}
    )
    assert result.exit_code == 0, result.output
    assert "fingerprint" in result.output
    assert '"effort": "high"' in result.output
    assert "2026-10-21" in result.output


def test_show_unknown_task_is_one_line_and_exit_2(runner: CliRunner) -> None:
    result = runner.invoke(
        main, ["policy", "show", "nope"], env={"GATEWAY_POLICY_DIR": str(SHIPPED)}
    )
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "unknown task 'nope'" in result.output


def test_show_broken_task_is_exit_2(runner: CliRunner) -> None:
    env = {
        "GATEWAY_POLICY_DIR": str(BROKEN),
        "GATEWAY_CATALOG_OVERRIDE": str(TEST_CATALOG_OVERRIDE),
    }
    result = runner.invoke(main, ["policy", "show", "model_alias"], env=env)
    assert result.exit_code == 2
    assert "does not load" in result.output


def test_diff_prints_changes_with_risk(runner: CliRunner, write_folder: WriteFolder) -> None:
    prompt = {"prompts/system.md": "x\n"}
    old = write_folder({**prompt, "task.toml": VALID})
    new = write_folder(
        {**prompt, "task.toml": VALID.replace("max_tokens = 1024", "max_tokens = 2000")}
    )
    result = runner.invoke(main, ["policy", "diff", str(old), str(new)])
    assert result.exit_code == 0, result.output
    assert "generation.max_tokens: 1024 -> 2000" in result.output
    assert "risk: max_tokens raised" in result.output
    as_json = runner.invoke(main, ["policy", "diff", str(old), str(new), "--format", "json"])
    (task,) = json.loads(as_json.output)["tasks"]
    assert task["changes"][0]["key"] == "generation.max_tokens"


def test_diff_with_an_unloadable_side_exits_1(runner: CliRunner, write_folder: WriteFolder) -> None:
    prompt = {"prompts/system.md": "x\n"}
    old = write_folder({**prompt, "task.toml": VALID})
    new = write_folder({**prompt, "task.toml": VALID.replace("claude-sonnet-4-6", "claude-x")})
    result = runner.invoke(main, ["policy", "diff", str(old), str(new)])
    assert result.exit_code == 1
    assert "task: not-loadable" in result.output


def test_models_list_json_matches_the_catalog(runner: CliRunner) -> None:
    result = runner.invoke(main, ["models", "list", "--format", "json"])
    assert result.exit_code == 0, result.output
    ids = [m["id"] for m in json.loads(result.output)]
    assert ids == Catalog.load().ids()
    table = runner.invoke(main, ["models", "list"])
    assert "claude-sonnet-4-5 -> claude-sonnet-4-5-20250929" in table.output


def test_usage_error_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(main, ["policy", "review", "--format", "yaml"])
    assert result.exit_code == 2
