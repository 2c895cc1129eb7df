"""Lifecycle truth: a model past its retirement date is an error, not a warning about the
future; `models list` says when its catalog may be stale; the shipped compliance_review returns
the reasons its prompt asks for."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from click.testing import CliRunner

from gateway.catalog import Catalog
from gateway.cli import main
from gateway.policy import PolicySet
from tests.policy.conftest import SHIPPED, VALID, WriteFolder

SONNET_45 = "claude-sonnet-4-5-20250929"  # deprecated, retires 2026-11-30 in the catalog
STALE_ENTRY = """\
schema = 1

[models."test:long-gone"]
provider = "local"
pinned = true
api_version = "local-1"
sampling = "all"
top_k = true
thinking_types = []
effort_levels = []
structured_outputs = false
max_output_tokens = 4096
context_window = 8192
lifecycle = "deprecated"
retires_at = 2020-01-31
"""


def _findings(write_folder: WriteFolder, catalog: Catalog, today: date) -> dict[str, str]:
    policy = VALID.replace("claude-sonnet-4-6", SONNET_45).replace("temperature = 0.0\n", "")
    folder = write_folder({"task.toml": policy, "prompts/system.md": "Answer."})
    entry = PolicySet.load(folder, catalog, today=today).entry("task")
    assert entry is not None
    return {f.rule: f.message for f in entry.findings if f.rule.startswith("model-")}


def test_a_model_past_its_retirement_date_is_an_error(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    found = _findings(write_folder, catalog, date(2026, 12, 1))
    assert set(found) == {"model-retired"}
    assert "retired on 2026-11-30" in found["model-retired"]
    assert "will fail" not in found["model-retired"]
    on_the_day = _findings(write_folder, catalog, date(2026, 11, 30))
    assert set(on_the_day) == {"model-retired"}


def test_before_the_date_it_is_a_warning_about_the_future(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    found = _findings(write_folder, catalog, date(2026, 11, 1))
    assert set(found) == {"model-retiring"}
    assert "retires on 2026-11-30" in found["model-retiring"]


def test_models_list_says_the_catalog_may_be_stale(tmp_path: Path) -> None:
    override = tmp_path / "override.toml"
    override.write_text(STALE_ENTRY, encoding="utf-8")
    result = CliRunner().invoke(
        main, ["models", "list"], env={"GATEWAY_CATALOG_OVERRIDE": str(override)}
    )
    assert result.exit_code == 0, result.output
    assert "The catalog may be stale" in result.output
    assert "test:long-gone: retired on 2020-01-31 (catalog: deprecated)" in result.output
    assert "gateway models sync" in result.output


def test_compliance_review_stops_after_the_reasons_its_prompt_asks_for(catalog: Catalog) -> None:
    policy = PolicySet.load(SHIPPED, catalog, today=date(2026, 11, 30)).get("compliance_review")
    prompt = policy.prompt.system or ""
    [stop] = policy.generation.stop_sequences
    assert stop == "</reasons>"
    # The answer form is <verdict>...</verdict> then <reasons>...</reasons>: stopping at the
    # end of the reasons returns both.
    assert prompt.index("</verdict>") < prompt.index("<reasons>") < prompt.index(stop)
