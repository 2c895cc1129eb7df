"""The shipped model catalog and its override file."""

from __future__ import annotations

import typing
from pathlib import Path

import anthropic.types.model_param as sdk_models
import pytest

import gateway.catalog
from gateway.catalog import Catalog, CatalogError
from gateway.catalog._model import SOURCED_FACTS

CATALOG = Catalog.load()


def _sdk_model_ids() -> set[str]:
    literal = typing.get_args(sdk_models.ModelParam)[0]
    return set(typing.get_args(literal))


def test_every_sdk_model_is_in_the_catalog() -> None:
    assert _sdk_model_ids() - set(CATALOG.ids()) == set()


def test_local_models_are_listed() -> None:
    for model_id in ("local:ngram", "local:ngram-draft"):
        info = CATALOG.get(model_id)
        assert info is not None
        assert (info.provider, info.sampling, info.top_k, info.pinned) == (
            "local",
            "all",
            True,
            True,
        )
        assert info.api_version == "local-1"


def test_aliases_are_not_pinned_and_inherit_their_target() -> None:
    alias = CATALOG.get("claude-sonnet-4-5")
    target = CATALOG.get("claude-sonnet-4-5-20250929")
    assert alias is not None and target is not None
    assert (alias.pinned, alias.alias_of) == (False, "claude-sonnet-4-5-20250929")
    assert alias.model_dump(exclude={"id", "pinned", "alias_of", "sources"}) == target.model_dump(
        exclude={"id", "pinned", "alias_of", "sources"}
    )


def test_api_version_follows_sampling_support() -> None:
    for info in CATALOG:
        if info.provider != "anthropic" or info.lifecycle == "retired":
            continue
        expected = "2026-10-21" if info.sampling == "none" else "2023-06-01"
        assert info.api_version == expected, info.id
        if info.sampling == "none":
            assert not info.top_k


@pytest.mark.parametrize(
    ("model_id", "sampling"),
    [
        ("claude-sonnet-4-6", "temperature-or-top-p"),
        ("claude-haiku-4-5-20251001", "temperature-or-top-p"),
        ("claude-opus-4-7", "none"),
        ("claude-opus-5-5", "none"),
        ("claude-sonnet-5-5", "none"),
    ],
)
def test_sampling_facts_match_the_reference(model_id: str, sampling: str) -> None:
    info = CATALOG.get(model_id)
    assert info is not None and info.sampling == sampling


def test_thinking_facts_that_the_rules_depend_on() -> None:
    opus55 = CATALOG.get("claude-opus-5-5")
    opus47 = CATALOG.get("claude-opus-4-7")
    assert opus55 is not None and opus47 is not None
    assert "disabled" not in opus55.thinking_types
    assert "enabled" not in opus47.thinking_types


def test_every_fact_has_a_source() -> None:
    for info in CATALOG:
        missing = [fact for fact in SOURCED_FACTS if not info.sources.get(fact)]
        assert missing == [], info.id


def test_override_replaces_and_adds_entries(tmp_path: Path) -> None:
    override = tmp_path / "override.toml"
    override.write_text(
        """schema = 1
[models."claude-sonnet-4-6"]
provider = "anthropic"
pinned = true
api_version = "2023-06-01"
sampling = "temperature-or-top-p"
top_k = false
max_output_tokens = 1000
context_window = 2000
lifecycle = "deprecated"
retires_at = 2027-06-01

[models."claude-new-9"]
provider = "anthropic"
pinned = true
api_version = "2026-10-21"
sampling = "none"
top_k = false
max_output_tokens = 128000
context_window = 1000000
lifecycle = "active"
"""
    )
    catalog = Catalog.load(override)
    replaced = catalog.get("claude-sonnet-4-6")
    assert replaced is not None
    assert (replaced.top_k, replaced.max_output_tokens, replaced.lifecycle) == (
        False,
        1000,
        "deprecated",
    )
    assert replaced.thinking_types == ()  # replaced whole, not merged
    assert catalog.get("claude-new-9") is not None
    assert len(catalog) == len(CATALOG) + 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("schema = 1\n[models.x\n", "not valid TOML"),
        ('schema = 1\n[models."x"]\nprovider = "openai"\n', "invalid"),
        ("schema = 2\n", "unsupported layout"),
        ('schema = 1\n[models."x"]\nalias_of = "nowhere"\n', "not a pinned entry"),
    ],
)
def test_a_bad_override_is_a_clear_error(tmp_path: Path, text: str, says: str) -> None:
    override = tmp_path / "bad.toml"
    override.write_text(text)
    with pytest.raises(CatalogError, match=says):
        Catalog.load(override)


def test_a_missing_override_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot be read"):
        Catalog.load(tmp_path / "missing.toml")


def test_public_names_are_pinned() -> None:
    assert set(gateway.catalog.__all__) == {"Catalog", "CatalogError", "ModelInfo"}
