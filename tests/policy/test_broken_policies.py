"""Every review rule, tripped by one broken policy file in tests/policy/broken/.

Each file's first line says what it must produce: ``# expect: <severity> <rule> <key>``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.catalog import Catalog
from gateway.policy import PolicyEntry, PolicySet, Severity
from tests.policy.conftest import BROKEN, TODAY, VALID, WriteFolder

CASES = sorted(BROKEN.glob("*.toml"))


def _expectation(path: Path) -> tuple[str, str, str]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    severity, rule, key = first.removeprefix("# expect: ").split(" ", 2)
    return severity, rule, key


@pytest.fixture(scope="module")
def broken(test_catalog: Catalog) -> dict[str, PolicyEntry]:
    return {e.file: e for e in PolicySet.load(BROKEN, test_catalog, today=TODAY).entries()}


# Every rule id the review can produce for a single file (docs/policies.md lists the same).
RULE_IDS = {
    "model-unknown", "model-alias", "model-retired", "model-retiring",
    "sampling-unsupported", "sampling-temperature-and-top-p", "sampling-top-k-unsupported",
    "sampling-out-of-range",
    "thinking-unsupported", "thinking-deprecated", "thinking-temperature", "thinking-top-k",
    "thinking-top-p", "thinking-budget", "effort-unsupported",
    "max-tokens-missing", "max-tokens-range", "max-tokens-streaming", "stop-sequence-blank",
    "json-without-schema", "json-unsupported-model", "schema-ignored",
    "temperature-nondeterministic", "reproducible-needs-replay", "cache-shared-across-callers",
    "caller-undefined-key", "caller-unbounded", "caller-out-of-range",
    "caller-part-unbounded", "caller-tools-conflict", "caller-output-conflict",
    "caller-metadata-conflict", "caller-thinking-unsupported", "caller-output-unsupported",
    "caller-thinking-budget", "caller-server-tools", "caller-context-edits", "caller-broad-grant",
    "tool-choice-unknown", "tool-choice-forced-with-thinking", "tool-strict-unsupported",
    "tool-server-not-allowed", "tools-file-invalid", "tool-schema-invalid",
    "toml-syntax", "unknown-key", "missing-key", "invalid-value", "task-name-mismatch",
    "schema-file-invalid", "file-unreadable", "file-outside-folder",
    "nesting-too-deep", "schema-pattern-unsafe", "verdict-pattern",
    "retention-below-minimum", "retention-above-maximum",
}  # fmt: skip


def test_the_broken_folder_trips_every_rule() -> None:
    assert {_expectation(p)[1] for p in CASES} == RULE_IDS


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_broken_policy_is_reported_by_its_rule(path: Path, broken: dict[str, PolicyEntry]) -> None:
    severity, rule, key = _expectation(path)
    entry = broken[path.name]
    found = {(f.severity.value, f.rule, f.key) for f in entry.findings}
    assert (severity, rule, key) in found
    assert all(f.file == path.name for f in entry.findings)
    assert all(f.message and f.advice for f in entry.findings)
    errors = [f for f in entry.findings if f.severity is Severity.ERROR]
    if severity == "error":
        # One problem per file, so each rule is proven on its own.
        assert [(f.rule, f.key) for f in errors] == [(rule, key)]
        assert entry.policy is None
    else:
        assert errors == []
        assert entry.policy is not None


def test_toml_syntax_finding_names_line_and_column(broken: dict[str, PolicyEntry]) -> None:
    (finding,) = broken["toml_syntax.toml"].findings
    assert "line 5, column 29" in finding.message


def test_duplicate_task_names_differing_in_case_are_refused(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    folder = write_folder(
        {"Risk.toml": VALID, "risk.toml": VALID, "prompts/system.md": "Be careful.\n"}
    )
    entries = PolicySet.load(folder, catalog, today=TODAY).entries()
    assert len(entries) == 2
    for entry in entries:
        assert [(f.rule, f.key) for f in entry.findings] == [("duplicate-task", "task")]
        assert entry.policy is None


def test_unreadable_policy_file_is_a_finding_not_a_crash(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    folder = write_folder({"latin1.toml": b'description = "caf\xe9"\n'})
    (entry,) = PolicySet.load(folder, catalog, today=TODAY).entries()
    assert [(f.rule, f.file) for f in entry.findings] == [("file-unreadable", "latin1.toml")]


def test_an_empty_folder_is_an_error(write_folder: WriteFolder, catalog: Catalog) -> None:
    folder = write_folder({"README.md": "no policies here\n"})
    findings = PolicySet.load(folder, catalog, today=TODAY).findings
    assert [f.rule for f in findings] == ["no-policies"]
