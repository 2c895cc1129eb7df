"""`gateway policy ...` and `gateway models list` through the real CLI and its error boundary."""

from __future__ import annotations

import json
import re
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
    assert "Findings (0 errors, 3 warnings)" in result.output  # the opened tasks' risk notes
    assert "  compliance_review (strict)" in result.output
    assert "  general_assistant (opened)" in result.output


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


def test_show_json_has_tools_attachments_and_prompt_cache(runner: CliRunner) -> None:
    def show(task: str) -> dict[str, object]:
        args = ["policy", "show", task, "--policy-dir", str(SHIPPED), "--format", "json"]
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.output))

    tools = show("sanctions_screening")
    assert tools["prompt_cache"] == "1h"
    assert tools["tools"] == {
        "file": "tools/lookup_entity.json",
        "names": ["lookup_entity"],
        "choice": "auto",
        "server": [],
    }
    assert tools["attachments"] == {
        "images": None,
        "documents": None,
        "caller_cache_control": False,
    }
    pdf = show("prospectus_summary")
    assert pdf["prompt_cache"] == "5m" and pdf["tools"] is None
    assert pdf["attachments"] == {
        "images": None,
        "documents": {"max_bytes": 10_000_000, "max_count": 1, "url": False},
        "caller_cache_control": False,
    }


def test_show_text_has_tools_attachments_and_prompt_cache(
    runner: CliRunner, tmp_path: Path
) -> None:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "prompts").mkdir()
    (folder / "prompts" / "p.md").write_text("Describe the chart.\n", encoding="utf-8")
    (folder / "charts.toml").write_text(
        'schema = 1\ndescription = "Read a chart."\nowner = "t"\n'
        '[model]\nid = "claude-sonnet-4-6"\n[generation]\nmax_tokens = 512\n'
        '[prompt]\nsystem_file = "prompts/p.md"\n'
        "[input]\nimages = { max_bytes = 2_000_000, max_count = 3, url = true }\n"
        "cache_control = true\n",
        encoding="utf-8",
    )

    def rows(task: str, folder: Path) -> dict[str, str]:
        result = runner.invoke(main, ["policy", "show", task, "--policy-dir", str(folder)])
        assert result.exit_code == 0, result.output
        table = result.output.split("\n\n")[0].splitlines()[2:]
        pairs = [re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in table]
        return {pair[0]: pair[-1] for pair in pairs}

    charts = rows("charts", folder)
    assert charts["prompt cache"] == "off"
    assert charts["tools"] == "none"
    assert charts["attachments.images"] == (
        "up to 3 per request, 2,000,000 bytes each; URL sources allowed"
    )
    assert charts["attachments.documents"] == "refused"
    assert charts["caller cache_control"] == "allowed"
    screening = rows("sanctions_screening", SHIPPED)
    assert screening["prompt cache"] == "ttl 1h"
    assert screening["tools.file"] == "tools/lookup_entity.json"
    assert screening["tools.names"] == "lookup_entity"
    assert screening["tools.choice"] == "auto"
    assert screening["tools.server"] == "none allowed"
    summary = rows("prospectus_summary", SHIPPED)
    assert summary["attachments.documents"] == (
        "up to 1 per request, 10,000,000 bytes each; base64 only (URL sources refused)"
    )


def test_review_and_show_say_in_json_what_a_caller_may_do(runner: CliRunner) -> None:
    review = runner.invoke(main, ["policy", "review", str(SHIPPED), "--format", "json"])
    contracts = {t["task"]: t["caller_contract"] for t in json.loads(review.output)["tasks"]}
    assert contracts["compliance_review"]["kind"] == "strict"
    assert contracts["coding_agent"]["kind"] == "opened"
    assert contracts["coding_agent"]["broad_grant"] is True
    assert not contracts["structured_extraction"]["broad_grant"]
    shown = runner.invoke(
        main,
        ["policy", "show", "general_assistant", "--policy-dir", str(SHIPPED), "--format", "json"],
    )
    data = json.loads(shown.output)
    assert data["caller_contract"] == contracts["general_assistant"]
    assert data["caller"]["system"] == {"mode": "append", "max_bytes": 65536}
    text = runner.invoke(
        main, ["policy", "show", "general_assistant", "--policy-dir", str(SHIPPED)]
    )
    assert "caller contract" in text.output and "RISK: callers bring" in text.output
