"""Fingerprints: unchanged by form (comments, whitespace, key order, line endings), changed by
any behaviour-affecting edit, the system prompt and the schema file included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.canonical import canonical_digest
from gateway.catalog import Catalog
from gateway.policy import Policy, PolicySet
from tests.policy.conftest import SHIPPED, TODAY, VALID, WriteFolder

PROMPT = "You review payments.\nAnswer PASS or ESCALATE.\n"
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}
JSON_POLICY = VALID.replace('format = "text"', 'format = "json"\nschema_file = "schemas/s.json"')

# Golden: if this changes, every fingerprint already recorded in an audit log stops matching.
# VALID has the default caller-scoped cache; the same policy recorded before cache scopes
# existed (task-wide sharing, no scope key in its content) keeps its recorded fingerprint.
EXPECTED_VALID_FINGERPRINT = (
    "sha256:3397cea54f0ec9fbf9e4766c53bc686ff2043b073e3184c57dfcd562bf172088"
)
RECORDED_BEFORE_SCOPES_FINGERPRINT = (
    "sha256:4b4b8bc53b5b9c9991facbd954d0a916bd81edf1c496dc1db03ac55f920643f6"
)


def _load(write_folder: WriteFolder, catalog: Catalog, policy: str = VALID, **files: str) -> Policy:
    folder = write_folder(
        {
            "task.toml": policy,
            "prompts/system.md": files.get("prompt", PROMPT),
            "schemas/s.json": files.get("schema", json.dumps(SCHEMA)),
        }
    )
    return PolicySet.load(folder, catalog, today=TODAY).get("task")


def test_fingerprint_is_a_tagged_sha256(write_folder: WriteFolder, catalog: Catalog) -> None:
    fp = _load(write_folder, catalog).fingerprint
    assert fp.startswith("sha256:")
    assert len(fp) == len("sha256:") + 64


def test_fingerprint_is_pinned_across_runs_and_machines(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    # Computed once from this exact policy; RFC 8785 makes it platform-independent.
    assert _load(write_folder, catalog).fingerprint == EXPECTED_VALID_FINGERPRINT


def test_a_policy_recorded_before_cache_scopes_keeps_its_fingerprint(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    recorded = _load(write_folder, catalog).content()
    del recorded["cache_scope"]  # what a log written before scopes existed holds
    legacy = Policy.from_content(recorded)
    assert legacy.cache.scope == "task"  # and it meant task-wide sharing
    assert legacy.fingerprint == RECORDED_BEFORE_SCOPES_FINGERPRINT


REFORMATTED = """\
# Comments, blank lines, spacing and key order do not change behaviour.
schema    = 1
owner = "tests"
description = "A valid test policy."

reproducible = true   # trailing comment

[cache]
mode = "replay"

[generation]
stop_sequences = [ "</answer>", ]
temperature = 0          # an integer 0 is the same value as 0.0
max_tokens = 1_024

[output]
format = "text"
[model]
id = "claude-sonnet-4-6"
[caller]
max_tokens = { max = 2048.0, min = 16 }
[prompt]
system_file = "./prompts/../prompts/system.md"
"""


def test_form_does_not_change_the_fingerprint(write_folder: WriteFolder, catalog: Catalog) -> None:
    original = _load(write_folder, catalog)
    reformatted = _load(write_folder, catalog, REFORMATTED)
    assert reformatted.fingerprint == original.fingerprint


def test_crlf_prompt_file_hashes_like_lf(write_folder: WriteFolder, catalog: Catalog) -> None:
    lf = _load(write_folder, catalog)
    crlf = _load(write_folder, catalog, prompt=PROMPT.replace("\n", "\r\n"))
    assert crlf.fingerprint == lf.fingerprint


def test_schema_file_formatting_does_not_change_it(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    compact = _load(write_folder, catalog, JSON_POLICY, schema=json.dumps(SCHEMA))
    pretty = _load(write_folder, catalog, JSON_POLICY, schema=json.dumps(SCHEMA, indent=4))
    assert compact.fingerprint == pretty.fingerprint


EDITS = {
    "model": ('id = "claude-sonnet-4-6"', 'id = "claude-opus-4-6"'),
    "max_tokens": ("max_tokens = 1024", "max_tokens = 1025"),
    "temperature": ("temperature = 0.0", "temperature = 0.1"),
    "stop_sequences": ('["</answer>"]', '["</answer>", "END"]'),
    "cache_mode": ('mode = "replay"', 'mode = "record"\n'),
    "reproducible": ("reproducible = true", "reproducible = false"),
    "caller_bound": ("max = 2048", "max = 2049"),
    "description": ("A valid test policy.", "A changed test policy."),
    "effort": ("temperature = 0.0", 'temperature = 0.0\neffort = "high"'),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_behavioural_edit_changes_the_fingerprint(
    edit: str, write_folder: WriteFolder, catalog: Catalog
) -> None:
    old, new = EDITS[edit]
    assert old in VALID
    text = VALID.replace(old, new)
    if edit in ("cache_mode", "reproducible"):
        text = text.replace("reproducible = true", "reproducible = false")
    assert (
        _load(write_folder, catalog, text).fingerprint != _load(write_folder, catalog).fingerprint
    )


def test_system_prompt_edit_changes_the_fingerprint(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    edited = _load(write_folder, catalog, prompt=PROMPT + "Be brief.\n")
    assert edited.fingerprint != _load(write_folder, catalog).fingerprint


def test_schema_edit_changes_the_fingerprint(write_folder: WriteFolder, catalog: Catalog) -> None:
    other = {**SCHEMA, "required": ["x"]}
    before = _load(write_folder, catalog, JSON_POLICY)
    after = _load(write_folder, catalog, JSON_POLICY, schema=json.dumps(other))
    assert before.fingerprint != after.fingerprint


def test_from_content_rebuilds_the_same_policy(write_folder: WriteFolder, catalog: Catalog) -> None:
    policy = _load(write_folder, catalog, JSON_POLICY)
    # Through JSON, as it comes back out of the audit database.
    recorded = json.loads(json.dumps(policy.content()))
    rebuilt = Policy.from_content(recorded)
    assert rebuilt.fingerprint == policy.fingerprint
    # Everything but where it was read from (the file and the names of the files it names).
    unplaced = policy.model_copy(
        update={
            "source": None,
            "prompt": policy.prompt.model_copy(update={"system_file": None}),
            "output": policy.output.model_copy(update={"schema_file": None}),
        }
    )
    assert rebuilt == unplaced
    assert rebuilt.prompt.system == PROMPT
    assert rebuilt.output.json_schema == SCHEMA


def test_content_inlines_prompt_and_schema_not_file_names(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    content = _load(write_folder, catalog, JSON_POLICY).content()
    text = json.dumps(content)
    assert content["system_prompt"] == PROMPT
    assert content["output_schema"] == SCHEMA
    assert "prompts/system.md" not in text
    assert "s.json" not in text


def test_from_content_rejects_unknown_keys(write_folder: WriteFolder, catalog: Catalog) -> None:
    content = {**_load(write_folder, catalog).content(), "surprise": 1}
    with pytest.raises(ValueError, match="surprise"):
        Policy.from_content(content)


def test_shipped_fingerprints_are_stable_between_two_loads(catalog: Catalog) -> None:
    shipped = Path(__file__).parents[2] / "policies"
    first = {p.task: p.fingerprint for p in PolicySet.load(shipped, catalog).policies()}
    second = {p.task: p.fingerprint for p in PolicySet.load(shipped, catalog).policies()}
    assert first == second
    assert len(set(first.values())) == len(first)


def test_a_derived_copy_gets_its_own_fingerprint(catalog: Catalog) -> None:
    policy = PolicySet.load(SHIPPED, catalog, today=TODAY).get("compliance_review")
    original = policy.fingerprint  # computed and cached before the copy is made
    derived = policy.on_model("local:ngram")
    assert derived.fingerprint == canonical_digest(derived.content())
    assert derived.fingerprint != original
    assert policy.fingerprint == original
