"""`gateway policy diff` a reviewer can trust: the text of a changed prompt or schema, the new
side's review findings, and which side does not load and why."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gateway.catalog import Catalog
from gateway.cli import main
from gateway.policy import PolicySet, diff_policy_sets
from tests.policy.conftest import TODAY, VALID, WriteFolder

PROMPT = "Review the payment.\nIf anything is missing, say ESCALATE.\n"
SCHEMA = '{"type": "object", "properties": {"verdict": {"enum": ["PASS", "BLOCK"]}}}'
JSON_POLICY = VALID.replace('format = "text"', 'format = "json"\nschema_file = "schemas/s.json"')


def _folders(write_folder: WriteFolder, old_prompt: str, new_prompt: str) -> tuple[str, str]:
    old = write_folder({"task.toml": VALID, "prompts/system.md": old_prompt})
    new = write_folder({"task.toml": VALID, "prompts/system.md": new_prompt})
    return str(old), str(new)


def test_a_weakened_control_is_visible_as_text(write_folder: WriteFolder, catalog: Catalog) -> None:
    old, new = _folders(write_folder, PROMPT, PROMPT.replace("ESCALATE", "PASS"))
    result = CliRunner().invoke(main, ["policy", "diff", old, new])
    assert result.exit_code == 0, result.output
    assert "-If anything is missing, say ESCALATE." in result.output
    assert "+If anything is missing, say PASS." in result.output
    assert "risk: system prompt changed" in result.output  # the risk note stays
    data = json.loads(CliRunner().invoke(main, ["policy", "diff", old, new, "--format",
                                                "json"]).output)  # fmt: skip
    [task] = data["tasks"]
    [text] = task["text_diffs"]
    assert text["key"] == "system_prompt"
    assert "-If anything is missing, say ESCALATE." in text["diff"]


def test_a_changed_schema_is_diffed_as_json(write_folder: WriteFolder, catalog: Catalog) -> None:
    old = write_folder({"task.toml": JSON_POLICY, "prompts/system.md": PROMPT,
                        "schemas/s.json": SCHEMA})  # fmt: skip
    held = SCHEMA.replace('"BLOCK"', '"BLOCK", "HOLD"')
    new = write_folder({"task.toml": JSON_POLICY, "prompts/system.md": PROMPT,
                        "schemas/s.json": held})  # fmt: skip
    [d] = diff_policy_sets(
        PolicySet.load(old, catalog, today=TODAY), PolicySet.load(new, catalog, today=TODAY)
    )
    [text] = d.text_diffs
    assert text.key == "output_schema"
    assert any(line.startswith("+") and '"HOLD"' in line for line in text.lines)


def test_the_new_sides_findings_and_a_failing_side_are_named(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    old = write_folder({"task.toml": VALID, "other.toml": VALID, "prompts/system.md": PROMPT})
    warned = VALID.replace('mode = "replay"', 'mode = "replay"\nscope = "task"')
    broken = VALID.replace("claude-sonnet-4-6", "claude-nope-1")
    new = write_folder({"task.toml": warned, "other.toml": broken, "prompts/system.md": PROMPT})
    result = CliRunner().invoke(main, ["policy", "diff", str(old), str(new)])
    assert result.exit_code == 1
    out = result.output
    assert "review of the new side: 1 finding(s)" in out
    assert "cache-shared-across-callers" in out
    assert "the new side (other.toml) does not load: 1 error(s)" in out
    assert "model-unknown" in out
    data = json.loads(CliRunner().invoke(main, ["policy", "diff", str(old), str(new), "--format",
                                                "json"]).output)  # fmt: skip
    tasks = {t["task"]: t for t in data["tasks"]}
    assert tasks["other"]["not_loading"][0]["side"] == "new"
    assert tasks["other"]["not_loading"][0]["errors"][0]["rule"] == "model-unknown"
    assert [f["rule"] for f in tasks["task"]["new_findings"]] == ["cache-shared-across-callers"]
