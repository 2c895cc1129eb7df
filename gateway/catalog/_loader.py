"""Load the shipped model catalog, optionally overlaid by an override file.

    catalog = Catalog.load()                           # gateway/catalog/models.toml
    catalog = Catalog.load(Path("models.override.toml"))
    catalog.get("claude-sonnet-4-6").sampling          # "temperature-or-top-p"

An override file has the same format; each of its entries replaces the shipped entry of the
same id whole (or adds a new one), so a reviewer reads one complete entry, never a merge.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.catalog._model import SOURCED_FACTS, ModelInfo
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
    unknown = set(data) - {"schema", "sources", "models"}
    if data.get("schema", 1) != 1 or unknown:
        raise CatalogError(
            f"catalog file {where} has an unsupported layout "
            f"(schema {data.get('schema')!r}, unknown keys {sorted(unknown)}).",
            hint="Use 'schema = 1' with [sources] and [models.\"<id>\"] tables only.",
        )
    return {"models": dict(data.get("models", {})), "sources": dict(data.get("sources", {}))}


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
