"""The one policy shape: what only the loader sets is refused in a file, and the field table
that `policy show` and the sign-off sheet print reads every row from the policy itself."""

from __future__ import annotations

from operator import attrgetter

import pytest
from pydantic import BaseModel

from gateway.catalog import Catalog
from gateway.policy import FIELDS, Policy, PolicySet, Shown, field_rows
from gateway.policy._content_form import mark
from tests.policy.conftest import TODAY, VALID, WriteFolder
from tests.policy.test_fingerprint_golden import FOLDERS


@pytest.mark.parametrize(
    ("table", "line", "key"),
    [
        ("[prompt]", 'system = "You approve everything."', "prompt.system"),
        ("[output]", "json_schema = {}", "output.json_schema"),
        ("[tools]", 'file = "tools.json"\ndefinitions = []', "tools.definitions"),
        ("", 'source = "elsewhere.toml"', "source"),
        ("", 'derived = { label = "x", reviewed_fingerprint = "y" }', "derived"),
    ],
)
def test_a_file_cannot_set_what_the_loader_resolves(
    table: str, line: str, key: str, write_folder: WriteFolder, catalog: Catalog
) -> None:
    if not table:
        text = f"{line}\n{VALID}"
    elif table in VALID:
        text = VALID.replace(f"{table}\n", f"{table}\n{line}\n")
    else:
        text = f"{VALID}\n{table}\n{line}\n"
    folder = write_folder({"task.toml": text, "prompts/system.md": "x\n"})
    entry = PolicySet.load(folder, catalog, today=TODAY).entry("task")
    assert entry is not None and entry.policy is None
    assert [(f.rule, f.key) for f in entry.findings] == [("unknown-key", key)]


def test_every_row_of_the_field_table_lives_in_the_policy(catalog: Catalog) -> None:
    policy = PolicySet.load(FOLDERS["maximal"], catalog, today=TODAY).get("sampled_everything")
    for field in FIELDS:
        attrgetter(field.where)(policy)  # AttributeError for a row naming no place in it


def test_show_and_the_sheet_print_the_same_rows(catalog: Catalog) -> None:
    policies = PolicySet.load(FOLDERS["maximal"], catalog, today=TODAY)
    policy = policies.get("sampled_everything")
    model = catalog.get(policy.model.id)
    assert model is not None
    shown = Shown.of(policy, model, today=TODAY)
    rows = dict(field_rows(shown))
    assert field_rows(shown) == field_rows(shown, "signoff") + field_rows(shown, "settings")
    assert rows["tools.choice"] == "lookup_entity"
    assert rows["stream"] == "must" and rows["prompt cache"] == "ttl 1h"
    assert rows["caller.forward_user_id"] == "true"
    assert rows["fingerprint"] == policy.fingerprint


def _content_keys(model: type[BaseModel]) -> list[str]:
    keys: list[str] = []
    for name, info in model.model_fields.items():
        how = mark(info)
        if how.left_out:
            continue
        table = info.annotation
        if how.flatten and isinstance(table, type) and issubclass(table, BaseModel):
            keys += _content_keys(table)
        else:
            keys.append(how.key or name)
    return keys


def test_every_field_has_its_own_key_in_the_content() -> None:
    # Two fields under one key would make two different policies hash alike.
    keys = _content_keys(Policy)
    assert len(keys) == len(set(keys))
    assert {"model_id", "system_prompt", "output_schema", "tools", "cache_scope"} <= set(keys)
    assert not {"system_file", "schema_file", "file", "source"} & set(keys)
