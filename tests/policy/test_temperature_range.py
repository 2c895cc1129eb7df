"""Sampling ranges follow the provider: temperature up to 1 for Claude and 2 for the local
model; top_p 0..1 for Claude, above 0 for the local sampler (it needs a non-empty nucleus)."""

from __future__ import annotations

import pytest

from gateway.catalog import Catalog
from gateway.policy import PolicySet
from tests.policy.conftest import TODAY, VALID, WriteFolder


@pytest.mark.parametrize(
    ("model", "temperature", "refused"),
    [
        ("claude-sonnet-4-6", 1.0, False),
        ("claude-sonnet-4-6", 1.2, True),
        ("local:ngram", 1.2, False),
        ("local:ngram", 2.0, False),
        ("local:ngram", 2.5, True),
    ],
)
def test_temperature_upper_bound_depends_on_the_provider(
    write_folder: WriteFolder, catalog: Catalog, model: str, temperature: float, refused: bool
) -> None:
    text = VALID.replace('"claude-sonnet-4-6"', f'"{model}"').replace(
        "temperature = 0.0", f"temperature = {temperature}"
    )
    text = text.replace("reproducible = true", "reproducible = false")
    folder = write_folder({"task.toml": text, "prompts/system.md": "Be brief."})
    entry = PolicySet.load(folder, catalog, today=TODAY).entry("task")
    rules = {f.rule for f in entry.findings if f.severity == "error"}
    assert ("sampling-out-of-range" in rules) is refused, entry.findings


@pytest.mark.parametrize(
    ("model", "refused"), [("claude-sonnet-4-6", False), ("local:ngram", True)]
)
def test_top_p_zero_is_refused_only_where_the_sampler_cannot_honour_it(
    write_folder: WriteFolder, catalog: Catalog, model: str, refused: bool
) -> None:
    text = VALID.replace('"claude-sonnet-4-6"', f'"{model}"').replace(
        "temperature = 0.0", "top_p = 0.0"
    )
    text = text.replace("reproducible = true", "reproducible = false")
    folder = write_folder({"task.toml": text, "prompts/system.md": "Be brief."})
    entry = PolicySet.load(folder, catalog, today=TODAY).entry("task")
    rules = {f.rule for f in entry.findings if f.severity == "error"}
    assert ("sampling-out-of-range" in rules) is refused, entry.findings
