"""Load the shipped model catalog, optionally overlaid by an override file.

    catalog = Catalog.load()                           # gateway/catalog/models.toml
    catalog = Catalog.load(Path("models.override.toml"))
    catalog.get("claude-sonnet-4-6").sampling          # "temperature-or-top-p"

An override file has the same format; each of its entries replaces the shipped entry of the
same id whole (or adds a new one), so a reviewer reads one complete entry, never a merge.
The one exception is prices, which change on their own (a bank's contract, a price list):
a ``[prices."<id>"]`` table sets only the prices of an entry the catalog already has, each
with the dated ``source`` it was read from, and leaves every capability as shipped::

    schema = 1
    [prices."claude-sonnet-4-6"]
    price_input = 3.0            # US dollars per million tokens
    price_output = 15.0
    source = "Contract schedule B, read 2026-12-01"
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.catalog._model import PRICE_FACTS, SOURCED_FACTS, ModelInfo
from gateway.errors import ConfigurationError


class CatalogError(ConfigurationError):
    """The catalog or its override file does not load."""


class Catalog:
    """An immutable mapping of model id to :class:`ModelInfo`."""

    def __init__(self, models: dict[str, ModelInfo]) -> None:
        self._models = dict(models)

    @classmethod
    def load(cls, override: Path | None = None) -> Catalog:
        shipped = resources.files("gateway.catalog").joinpath("models.toml").read_text("utf-8")
        raw = _parse(shipped, "gateway/catalog/models.toml")
        if override is not None:
            try:
                text = override.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CatalogError(
                    f"catalog override file {str(override)!r} cannot be read: {exc}.",
                    hint="Check GATEWAY_CATALOG_OVERRIDE or remove it to use the shipped catalog.",
                ) from None
            extra = _parse(text, str(override))
            raw["models"].update(extra["models"])
            raw["sources"].update(extra["sources"])
            _priced(raw["models"], extra["prices"], str(override))
        return cls(_build(raw["models"], raw["sources"]))

    def get(self, model_id: str) -> ModelInfo | None:
        return self._models.get(model_id)

    def ids(self) -> list[str]:
        return sorted(self._models)

    def __iter__(self) -> Iterator[ModelInfo]:
        """Every entry, sorted by id."""
        return iter([self._models[i] for i in self.ids()])

    def __len__(self) -> int:
        return len(self._models)


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"catalog file {where} is not valid TOML: {exc}.") from None
    unknown = set(data) - {"schema", "sources", "models", "prices"}
    if data.get("schema", 1) != 1 or unknown:
        raise CatalogError(
            f"catalog file {where} has an unsupported layout "
            f"(schema {data.get('schema')!r}, unknown keys {sorted(unknown)}).",
            hint='Use \'schema = 1\' with [sources], [models."<id>"] and [prices."<id>"] '
            "tables only.",
        )
    return {
        "models": dict(data.get("models", {})),
        "sources": dict(data.get("sources", {})),
        "prices": dict(data.get("prices", {})),
    }


PRICES_HINT = (
    'Write [prices."<model id>"] with any of price_input, price_output, price_cache_write, '
    'price_cache_read (US dollars per million tokens) and source = "<where, read YYYY-MM-DD>".'
)


def _priced(models: dict[str, Any], prices: dict[str, Any], where: str) -> None:
    """Set the prices of ``prices`` on the entries of ``models`` (in place), each price
    sourced by its table's ``source``; anything else in a prices table is refused."""
    for model_id, table in prices.items():
        entry = models.get(model_id)
        if not isinstance(table, dict) or not isinstance(entry, dict):
            what = "is not a table" if isinstance(entry, dict) else "names no model in the catalog"
            raise CatalogError(
                f"catalog override {where}: [prices.{model_id!r}] {what}.", hint=PRICES_HINT
            )
        given = {k: v for k, v in table.items() if k != "source"}
        unknown = sorted(set(given) - set(PRICE_FACTS))
        source = table.get("source")
        if unknown or not given or not isinstance(source, str):
            why = (
                f"has keys that are not prices: {', '.join(unknown)}"
                if unknown
                else "sets no price"
                if not given
                else "names no source"
            )
            raise CatalogError(
                f"catalog override {where}: [prices.{model_id!r}] {why}.", hint=PRICES_HINT
            )
        sources = {**entry.get("sources", {}), **dict.fromkeys(given, source)}
        models[model_id] = {**entry, **given, "sources": sources}


def _build(entries: dict[str, Any], default_sources: dict[str, str]) -> dict[str, ModelInfo]:
    models: dict[str, ModelInfo] = {}
    for model_id, entry in entries.items():
        if not isinstance(entry, dict):
            raise CatalogError(f"catalog entry {model_id!r} is not a table.")
        target_id = entry.get("alias_of")
        if target_id is not None:
            # An alias inherits its target's capabilities; only `pinned` and `alias_of` differ.
            target = entries.get(target_id)
            if not isinstance(target, dict) or "alias_of" in target:
                raise CatalogError(
                    f"catalog alias {model_id!r} points at {target_id!r}, "
                    "which is not a pinned entry.",
                )
            entry = {**target, **entry, "pinned": False}
        sources = {fact: default_sources[fact] for fact in SOURCED_FACTS if fact in default_sources}
        if target_id is not None and "alias_of" in default_sources:
            sources["alias_of"] = default_sources["alias_of"]
        sources.update(entry.get("sources", {}))
        try:
            models[model_id] = ModelInfo.model_validate(
                {**entry, "id": model_id, "sources": sources}
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise CatalogError(
                f"catalog entry {model_id!r} is invalid at {where!r}: {first['msg']}.",
            ) from None
    return models
