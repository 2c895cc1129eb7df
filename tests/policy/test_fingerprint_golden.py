"""Golden fingerprints: every shipped policy, every policy the tests' fixtures load, two
maximal policies (``golden/maximal/``: every optional field set), derived policies and a
policy recorded before cache scopes existed keep the exact fingerprint and canonical bytes
they had when ``golden/fingerprints.json`` was written (from the code at 56476ec).

Audit logs point at these fingerprints and store these bytes: a change here means recorded
requests no longer name the policy that governed them. Never regenerate the file to make
this test pass; add cases only.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from audit.canonical import canonical_bytes, digest
from gateway.catalog import Catalog
from gateway.policy import Caller, Policy, PolicySet
from tests.policy.conftest import SHIPPED, TEST_CATALOG_OVERRIDE, TODAY, WriteFolder

GOLDEN = Path(__file__).parent / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "fingerprints.json").read_text())["cases"]
OPTIONAL_KEYS = (
    "inference_geo", "prompt_cache", "tools", "tool_choice", "server_tools", "input", "stream",
    "cache_scope", "risk_tier", "effective_date", "regulations",
)  # fmt: skip
FOLDERS = {"shipped": SHIPPED, "maximal": GOLDEN / "maximal"}


def _cases(*kinds: str) -> list[dict[str, Any]]:
    return [c for c in CASES if c["kind"] in kinds]


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [f"{c['kind']}-{c['name']}-{c['fingerprint'][7:15]}" for c in cases]


def _assert_pinned(policy: Policy, case: dict[str, Any]) -> None:
    assert policy.fingerprint == case["fingerprint"]
    assert digest(canonical_bytes(policy.content())) == case["fingerprint"]
    assert canonical_bytes(policy.content()) == canonical_bytes(case["content"])


@pytest.mark.parametrize("kind", sorted(FOLDERS))
def test_every_policy_of_a_folder_keeps_its_fingerprint(kind: str, catalog: Catalog) -> None:
    expected = {c["name"]: c for c in _cases(kind)}
    loaded = PolicySet.load(FOLDERS[kind], catalog, today=TODAY)
    assert sorted(expected) == loaded.tasks()  # a new shipped policy needs a golden case
    for task, case in expected.items():
        _assert_pinned(loaded.get(task), case)


FIXTURES = _cases("fixture")


@pytest.mark.parametrize("case", FIXTURES, ids=_ids(FIXTURES))
def test_every_fixture_policy_keeps_its_fingerprint(
    case: dict[str, Any], write_folder: WriteFolder, catalog: Catalog, test_catalog: Catalog
) -> None:
    folder = write_folder(case["files"])
    used = catalog if case["catalog"] == "shipped" else test_catalog
    loaded = PolicySet.load(folder, used, today=date.fromisoformat(case["today"]))
    _assert_pinned(loaded.get(case["name"]), case)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_a_recorded_policy_rebuilds_with_its_fingerprint(case: dict[str, Any]) -> None:
    # What replay and approvals do with the content an audit log holds.
    _assert_pinned(Policy.from_content(case["content"]), case)


def test_the_golden_set_covers_what_it_says() -> None:
    kinds = {c["kind"] for c in CASES}
    assert kinds == {"shipped", "maximal", "fixture", "derived", "recorded"}
    assert TEST_CATALOG_OVERRIDE.is_file()
    maximal = [c["content"] for c in _cases("maximal")]
    # Between them the maximal policies set every optional field the content can hold.
    keys = set().union(*maximal)
    assert set(OPTIONAL_KEYS) <= keys
    generation = [c["generation"] for c in maximal]
    assert any(g["thinking"] and g["thinking"].get("display") for g in generation)
    assert any(g["temperature"] is not None and g["top_k"] is not None for g in generation)
    assert any(c["caller"].get("forward_user_id") for c in maximal)
    # Every [caller] key, the caller contract's included, has its layout pinned.
    assert set(Caller.model_fields) <= set().union(*(c["caller"] for c in maximal))
    assert any(c["output_schema"] is not None for c in maximal)
