"""Policies with tools, attachments and prompt caching, written into tmp_path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.catalog import Catalog, ModelInfo
from gateway.policy import Policy, PolicySet
from tests.policy.conftest import TODAY

LOOKUP = {
    "name": "lookup_entity",
    "description": "Look up a legal entity in the firm's reference data.",
    "input_schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    },
}

BASE = """\
schema = 1
description = "A test policy."
owner = "tests"

[model]
id = "claude-sonnet-4-6"

[generation]
max_tokens = 1024

[prompt]
system_file = "prompts/system.md"
"""

MakePolicy = Callable[..., Policy]


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.load()


@pytest.fixture
def make_policy(tmp_path: Path, catalog: Catalog) -> MakePolicy:
    """A loaded policy from BASE plus ``extra`` TOML, with ``tools`` as tools/tools.json."""
    counter = iter(range(1000))

    def make(extra: str = "", *, tools: list[dict[str, Any]] | None = None) -> Policy:
        folder = tmp_path / f"policies{next(counter)}"
        (folder / "prompts").mkdir(parents=True)
        (folder / "prompts" / "system.md").write_text("Be careful.\n", encoding="utf-8")
        text = BASE + extra
        if tools is not None:
            (folder / "tools").mkdir()
            (folder / "tools" / "tools.json").write_text(json.dumps(tools), encoding="utf-8")
        (folder / "task.toml").write_text(text, encoding="utf-8")
        policies = PolicySet.load(folder, catalog, today=TODAY)
        entry = policies.entry("task")
        assert entry is not None
        assert entry.policy is not None, [f.line() for f in entry.findings]
        return entry.policy

    return make


def model_of(catalog: Catalog, policy: Policy) -> ModelInfo:
    model = catalog.get(policy.model.id)
    assert model is not None
    return model
