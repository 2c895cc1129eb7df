"""Policy diff: field by field, with risk notes; added, removed and unloadable tasks."""

from __future__ import annotations

from gateway.catalog import Catalog
from gateway.policy import PolicySet, TaskDiff, diff_policy_sets
from tests.policy.conftest import TODAY, VALID, WriteFolder

PROMPT = {"prompts/system.md": "Be careful.\n"}


def _diff(
    write_folder: WriteFolder, catalog: Catalog, old: dict[str, str], new: dict[str, str]
) -> dict[str, TaskDiff]:
    before = PolicySet.load(write_folder({**PROMPT, **old}), catalog, today=TODAY)
    after = PolicySet.load(write_folder(new), catalog, today=TODAY)
    return {d.task: d for d in diff_policy_sets(before, after)}


def test_changes_carry_old_new_and_risk(write_folder: WriteFolder, catalog: Catalog) -> None:
    changed = (
        VALID.replace("temperature = 0.0", "temperature = 0.4")
        .replace('mode = "replay"', 'mode = "record"')
        .replace("reproducible = true", "reproducible = false")
        .replace("claude-sonnet-4-6", "claude-opus-4-6")
    )
    diffs = _diff(
        write_folder,
        catalog,
        {"task.toml": VALID},
        {"task.toml": changed, "prompts/system.md": "Be very careful.\n"},
    )
    d = diffs["task"]
    assert d.status == "changed"
    assert d.old_fingerprint != d.new_fingerprint
    changes = {c.key: c for c in d.changes}
    assert set(changes) == {
        "generation.temperature",
        "cache_mode",
        "reproducible",
        "model_id",
        "system_prompt_digest",
    }
    assert (changes["generation.temperature"].old, changes["generation.temperature"].new) == (
        0.0,
        0.4,
    )
    assert "reproducibility" in (changes["generation.temperature"].risk or "")
    assert "replay turned off" in (changes["cache_mode"].risk or "")
    assert "model changed" in (changes["model_id"].risk or "")
    assert changes["system_prompt_digest"].new.startswith("sha256:")


def test_unchanged_added_removed_and_unloadable(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    broken = VALID.replace("max_tokens = 1024", "max_tokens = 0")
    diffs = _diff(
        write_folder,
        catalog,
        {"same.toml": VALID, "gone.toml": VALID, "bad.toml": VALID},
        {**PROMPT, "same.toml": VALID, "new.toml": VALID, "bad.toml": broken},
    )
    assert {t: d.status for t, d in diffs.items()} == {
        "same": "unchanged",
        "gone": "removed",
        "new": "added",
        "bad": "not-loadable",
    }
    assert diffs["same"].changes == ()


def test_a_wider_caller_contract_carries_its_risk_notes(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    contract = (
        '\nsystem = { mode = "append", max_bytes = 1024 }\n'
        'betas = { allowed = ["a-2025-01-01"] }\n'
        "output = { json_schema = true, max_bytes = 1024 }\n"
        '\n[caller.tools]\nallow = ["*"]\ndeny = ["computer*"]\nmax_count = 4\nmax_bytes = 4096\n'
    )
    old = VALID + contract
    new = VALID.replace("max = 2048 }", 'max = 2048, over = "cap" }') + contract.replace(
        '"append"', '"own"'
    ).replace('["a-2025-01-01"]', '["a-2025-01-01", "b-2025-02-02"]').replace(
        'deny = ["computer*"]\n', ""
    ).replace("json_schema = true", "json_schema = false")
    d = _diff(write_folder, catalog, {"task.toml": old}, {"task.toml": new, **PROMPT})["task"]
    risks = {c.key: c.risk for c in d.changes}
    assert (
        risks["caller.system.mode"] == "callers' own system prompt gains weight over the policy's"
    )
    assert risks["caller.betas.allowed"] == "callers get more freedom: ['b-2025-02-02'] allowed"
    assert risks["caller.tools.deny"] == "callers get more freedom: ['computer*'] no longer denied"
    assert risks["caller.output.json_schema"] == (
        "callers' answers are no longer checked against their schema"
    )
    assert risks["caller.max_tokens.over"] is not None
