"""Helpers for policy tests: real policy folders written into tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest

from gateway.catalog import Catalog

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SHIPPED = REPO / "policies"
BROKEN = HERE / "broken"
TEST_CATALOG_OVERRIDE = HERE / "catalog_override.toml"
TODAY = date(2026, 11, 30)  # review results that depend on dates are pinned to this day

VALID = """\
schema = 1
description = "A valid test policy."
owner = "tests"
reproducible = true

[model]
id = "claude-sonnet-4-6"

[generation]
max_tokens = 1024
temperature = 0.0
stop_sequences = ["</answer>"]

[prompt]
system_file = "prompts/system.md"

[output]
format = "text"

[cache]
mode = "replay"

[caller]
max_tokens = { min = 16, max = 2048 }
"""


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog.load()


@pytest.fixture(scope="session")
def test_catalog() -> Catalog:
    return Catalog.load(TEST_CATALOG_OVERRIDE)


WriteFolder = Callable[..., Path]


@pytest.fixture
def write_folder(tmp_path: Path) -> WriteFolder:
    """Write {relative path: text} into a fresh policy folder and return the folder."""
    counter = iter(range(1000))

    def write(files: dict[str, str | bytes]) -> Path:
        folder = tmp_path / f"policies{next(counter)}"
        for relative, content in files.items():
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        return folder

    return write
