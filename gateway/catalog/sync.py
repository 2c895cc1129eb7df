"""Refresh the catalog's API-derived facts from the Models API into a reviewable override file.

    client = build_client(api_key=key, base_url=None)
    listed = fetch_models(client, api_key=key)               # every models.list page
    report = compare(Catalog.load(), listed, on=date(2026, 12, 1))
    if report.changed:
        Path("models.override.toml").write_text(render_override(report), "utf-8")

``models.list`` reports lifecycle, retirement date, limits and capabilities (thinking types,
effort levels, structured outputs) but not which sampling parameters a model honours. So only
those API facts are refreshed; ``sampling``, ``top_k`` and ``api_version`` are copied from the
catalog untouched, and a model new to the catalog gets the safe default (``sampling = "none"``,
``top_k = false``) with a source saying a person must curate it. Every refreshed fact's source
is ``"models.list on <date>"``.

The override has the loader's format (``Catalog.load(path)`` reads it): each entry is complete
and replaces the shipped entry whole. Entries of an earlier override (``carried``) are kept as
they are, so hand-curated facts in it survive the next sync.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from gateway.catalog._loader import Catalog, CatalogError
from gateway.catalog._model import SOURCED_FACTS, ModelInfo
from gateway.errors import UpstreamError

if TYPE_CHECKING:  # the SDK costs about a second to import; only fetching needs it
    import anthropic
    import anthropic.types

__all__ = [
    "API_FACTS",
    "FactChange",
    "ListedModel",
    "ModelChange",
    "SyncReport",
    "build_client",
    "compare",
    "fetch_models",
    "read_override",
    "render_override",
]

# The catalog facts models.list reports (catalog field names). Nothing else is ever changed.
API_FACTS = (
    "lifecycle",
    "retires_at",
    "max_output_tokens",
    "context_window",
    "thinking_types",
    "effort_levels",
    "structured_outputs",
)
# Compared as sets, written in this order (the order the catalog uses).
_THINKING_ORDER = ("enabled", "adaptive", "between_tools", "disabled")
_EFFORT_ORDER = ("low", "medium", "high", "xhigh", "max")

# The Models API describes the models of one provider; only its catalog rows are synced.
SYNCED_PROVIDER = "anthropic"

# For a model new to the catalog: the API facts come from models.list, the rest are defaults a
# person has to confirm. sampling "none" is the safe one: the gateway then sends no sampling
# parameter, which every model accepts.
NEW_MODEL_DEFAULTS: dict[str, tuple[Any, str]] = {
    "provider": (SYNCED_PROVIDER, "{source}"),
    "pinned": (
        True,
        "assumed: from the 4.6 generation on a model id names one fixed model "
        "(reference/claude-api.md); confirm by hand",
    ),
    "api_version": (
        "2026-10-21",
        "follows sampling = none (2026-10-21 rejects every sampling parameter); curate by hand",
    ),
    "sampling": (
        "none",
        "safe default for a model new to the catalog: models.list does not report sampling "
        "support; the sampling facts must be curated by hand",
    ),
    "top_k": (
        False,
        "safe default for a model new to the catalog: models.list does not report sampling "
        "support; the sampling facts must be curated by hand",
    ),
}


class ListedModel(BaseModel):
    """The catalog facts one ``models.list`` entry reports; ``None`` where it reports nothing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    lifecycle: Literal["active", "deprecated", "retired"]
    retires_at: date | None = None
    max_output_tokens: int | None = None
    context_window: int | None = None
    thinking_types: tuple[str, ...] | None = None
    effort_levels: tuple[str, ...] | None = None
    structured_outputs: bool | None = None

    @classmethod
    def from_sdk(cls, info: anthropic.types.ModelInfo) -> ListedModel:
        caps = info.capabilities
        thinking = effort = None
        structured = None
        if caps is not None:
            kinds = caps.thinking.types
            thinking = tuple(k for k in _THINKING_ORDER if getattr(kinds, k).supported)
            levels = caps.effort
            effort = (
                tuple(
                    lvl
                    for lvl in _EFFORT_ORDER
                    if (flag := getattr(levels, lvl)) is not None and flag.supported
                )
                if levels.supported
                else ()
            )
            structured = caps.structured_outputs.supported
        return cls(
            id=info.id,
            lifecycle=info.lifecycle,
            retires_at=_utc_date(info.retires_at),
            max_output_tokens=info.max_tokens,
            context_window=info.max_input_tokens,
            thinking_types=thinking,
            effort_levels=effort,
            structured_outputs=structured,
        )

    def facts(self) -> dict[str, Any]:
        """The facts this entry states, by catalog field name."""
        stated = {f: getattr(self, f) for f in API_FACTS if getattr(self, f) is not None}
        # A null retires_at means "none scheduled" on an active or deprecated model; on a
        # retired one it says nothing, and the catalog's historical date stays.
        if self.retires_at is None and self.lifecycle != "retired":
            stated["retires_at"] = None
        return stated


class FactChange(BaseModel):
    """One fact that models.list states differently from the catalog (``old`` None: new model)."""

    model_config = ConfigDict(frozen=True)

    fact: str
    old: Any
    new: Any


class ModelChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    new: bool
    changes: tuple[FactChange, ...]


class SyncReport(BaseModel):
    """What one sync found, and the override entries that say it."""

    model_config = ConfigDict(frozen=True)

    checked_on: date
    listed: int
    models: tuple[ModelChange, ...]
    # Catalog entries (anthropic, pinned, not retired) models.list did not show for this key:
    # invitation-only models, for example. Reported, never changed.
    unlisted: tuple[str, ...] = ()
    # New models models.list showed without the limits a catalog entry needs: not added.
    skipped: tuple[str, ...] = ()
    entries: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}

    @property
    def changed(self) -> bool:
        return bool(self.models)


# -- fetch ------------------------------------------------------------------------------------


def build_client(
    *, api_key: str, base_url: str | None, timeout_s: float = 60.0
) -> anthropic.Anthropic:
    """An SDK client built like the provider's: explicit key and URL, no SDK retries."""
    import httpx2

    from gateway.providers import anthropic as first_party

    timeout = httpx2.Timeout(timeout_s, connect=min(5.0, timeout_s))
    return first_party.build_client(api_key=api_key, base_url=base_url, timeout=timeout)


def fetch_models(client: anthropic.Anthropic, *, api_key: str) -> list[ListedModel]:
    """Every model ``models.list`` shows, retired ones included (their lifecycle is a fact).

    Raises :class:`UpstreamError` (one line, no upstream text, no key) if any page fails.
    """
    import anthropic

    from gateway.providers.anthropic import FIRST_PARTY
    from gateway.providers.wire import UPSTREAM_FAILURES, classify, describe

    try:
        pages = client.models.list(limit=1000, lifecycle=["active", "deprecated", "retired"])
        return [ListedModel.from_sdk(info) for info in pages]
    except anthropic.APIResponseValidationError as exc:
        failure = describe(exc.status_code, "malformed_response", None)
        raise _failed(failure, status=exc.status_code, error_type="malformed_response") from None
    except UPSTREAM_FAILURES as exc:
        found = classify(exc, profile=FIRST_PARTY, secrets=(api_key,))
        raise _failed(
            found.message,
            status=found.status,
            error_type=found.error_type,
            upstream_request_id=found.upstream_request_id,
        ) from None
    except ValueError:  # not JSON, or an entry stating an impossible fact (ValidationError)
        raise _failed(
            "models.list answered with a body that is not a list of model descriptions",
            status=200,
            error_type="malformed_response",
        ) from None


def _failed(
    message: str,
    *,
    status: int | None,
    error_type: str,
    upstream_request_id: str | None = None,
) -> UpstreamError:
    hints = {
        "authentication_error": "Check that ANTHROPIC_API_KEY holds a valid key.",
        "permission_error": "The key may not list models; use a key of the organisation.",
    }
    return UpstreamError(
        f"models.list failed: {message}.",
        hint=hints.get(error_type, "Nothing was written; try again later."),
        status=status,
        error_type=error_type,
        upstream_request_id=upstream_request_id,
        attempts=1,
    )


def _utc_date(moment: datetime | None) -> date | None:
    if moment is None:
        return None
    return (moment.astimezone(UTC) if moment.tzinfo else moment).date()


# -- compare ----------------------------------------------------------------------------------


def read_override(path: Path) -> dict[str, Any]:
    """An earlier override file as tables (``models``, ``sources``), to carry into the next."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"override file {str(path)!r} cannot be read: {exc}.") from None
    return {"models": dict(data.get("models", {})), "sources": dict(data.get("sources", {}))}


def compare(
    catalog: Catalog,
    listed: Sequence[ListedModel],
    *,
    on: date,
    carried: Mapping[str, Any] | None = None,
) -> SyncReport:
    """What ``listed`` says differently from ``catalog``, and the override entries saying it.

    ``catalog`` is the baseline (the shipped catalog, or shipped plus ``carried``);
    ``carried`` is an earlier override (see :func:`read_override`) whose entries are kept.
    """
    source = f"models.list on {on.isoformat()}"
    entries: dict[str, dict[str, Any]] = {
        k: dict(v) for k, v in (carried or {}).get("models", {}).items()
    }
    models: list[ModelChange] = []
    skipped: list[str] = []
    for item in sorted(listed, key=lambda m: m.id):
        info = catalog.get(item.id)
        if info is None:
            entry = _new_entry(item, source)
            if entry is None:
                if item.lifecycle != "retired":
                    skipped.append(item.id)
                continue
            entries[item.id] = entry
            facts = {**{f: v for f, (v, _) in NEW_MODEL_DEFAULTS.items()}, **item.facts()}
            models.append(
                ModelChange(
                    id=item.id,
                    new=True,
                    changes=tuple(FactChange(fact=f, old=None, new=v) for f, v in facts.items()),
                )
            )
            continue
        if info.alias_of is not None or info.provider != SYNCED_PROVIDER:
            continue  # an alias follows its pinned target; only the target is compared
        changes = [
            FactChange(fact=fact, old=getattr(info, fact), new=new)
            for fact, new in item.facts().items()
            if _normal(fact, getattr(info, fact)) != _normal(fact, new)
        ]
        if changes:
            entries[item.id] = _refreshed_entry(info, changes, source)
            models.append(ModelChange(id=item.id, new=False, changes=tuple(changes)))
    seen = {m.id for m in listed}
    unlisted = tuple(
        m.id
        for m in catalog
        if m.provider == SYNCED_PROVIDER
        and m.alias_of is None
        and m.lifecycle != "retired"
        and m.id not in seen
    )
    return SyncReport(
        checked_on=on,
        listed=len(listed),
        models=tuple(models),
        unlisted=unlisted,
        skipped=tuple(skipped),
        entries=entries,
        sources=dict((carried or {}).get("sources", {})),
    )


def _normal(fact: str, value: Any) -> Any:
    if fact in ("thinking_types", "effort_levels"):
        return frozenset(value or ())
    return value


def _ordered(fact: str, value: Any) -> Any:
    if fact == "thinking_types":
        return [k for k in _THINKING_ORDER if k in value] + sorted(set(value) - {*_THINKING_ORDER})
    if fact == "effort_levels":
        return [k for k in _EFFORT_ORDER if k in value] + sorted(set(value) - {*_EFFORT_ORDER})
    return value


def _refreshed_entry(info: ModelInfo, changes: Iterable[FactChange], source: str) -> dict[str, Any]:
    """The complete entry: every catalog fact, with the changed API facts replaced."""
    entry = info.model_dump(mode="python", exclude={"id", "alias_of", "sources"})
    sources = dict(info.sources)
    for change in changes:
        entry[change.fact] = _ordered(change.fact, change.new)
        sources[change.fact] = source
    return _tidy(entry, sources)


def _new_entry(item: ListedModel, source: str) -> dict[str, Any] | None:
    if item.lifecycle == "retired" or not item.max_output_tokens or not item.context_window:
        return None  # nobody can call it, or a catalog entry would have to guess its limits
    entry: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for fact, (value, why) in NEW_MODEL_DEFAULTS.items():
        entry[fact], sources[fact] = value, why.format(source=source)
    for fact, value in item.facts().items():
        entry[fact], sources[fact] = _ordered(fact, value), source
    for fact in ("thinking_types", "effort_levels"):
        if fact not in entry:  # the API gave no capabilities: claim nothing optional
            entry[fact], sources[fact] = [], f"{source} (no capabilities reported)"
    entry.setdefault("structured_outputs", False)
    sources.setdefault("structured_outputs", f"{source} (no capabilities reported)")
    return _tidy(entry, sources)


def _tidy(entry: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
    """The entry in the shipped file's key order, without empty optional keys."""
    keys = [*SOURCED_FACTS, "deprecated_thinking_types"]
    keys += sorted(set(entry) - set(keys))
    out = {
        k: list(entry[k]) if isinstance(entry[k], tuple) else entry[k]
        for k in keys
        if entry.get(k) is not None
    }
    for optional in ("deprecated_thinking_types", "transports"):
        if not out.get(optional):
            out.pop(optional, None)
    transports = entry.get("transports")
    if transports:
        out["transports"] = {name: list(ids) for name, ids in transports.items()}
    order = [f for f in SOURCED_FACTS if f in sources] + sorted(set(sources) - set(SOURCED_FACTS))
    out["sources"] = {f: sources[f] for f in order}
    return out


# -- render -----------------------------------------------------------------------------------


def render_override(report: SyncReport) -> str:
    """The override file for ``report``: TOML that ``Catalog.load(path)`` reads."""
    on = report.checked_on.isoformat()
    notes = {m.id: m for m in report.models}
    lines = [
        f"# Catalog override written by `gateway models sync` on {on} from models.list",
        f"# ({report.listed} models listed). Review it like code, then point",
        '# GATEWAY_CATALOG_OVERRIDE at it. Each [models."<id>"] table replaces the shipped',
        "# entry whole. Only the API-derived facts were refreshed (lifecycle, retires_at,",
        "# max_output_tokens, context_window, thinking_types, effort_levels,",
        "# structured_outputs); sampling, top_k and api_version are copied from the catalog:",
        "# models.list does not report sampling support, so those stay curated by hand.",
        "",
        "schema = 1",
    ]
    if report.sources:
        lines += ["", "[sources]", *(_pair(k, v) for k, v in report.sources.items())]
    for model_id in sorted(report.entries):
        lines.append("")
        change = notes.get(model_id)
        if change is not None and change.new:
            lines.append(
                '# NEW: sampling = "none" and top_k = false are the safe default, not a fact;'
            )
            lines.append("# curate them (and api_version, pinned) by hand before relying on them.")
        elif change is not None:
            for fact in change.changes:
                lines.append(f"# changed: {fact.fact} {_shown(fact.old)} -> {_shown(fact.new)}")
        lines += _table(["models", model_id], report.entries[model_id])
    return "\n".join(lines) + "\n"


def _table(path: list[str], table: Mapping[str, Any]) -> list[str]:
    lines = [f"[{'.'.join(_key(p) for p in path)}]"]
    nested = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    lines += [_pair(k, v) for k, v in table.items() if k not in nested]
    for key, sub in nested.items():
        lines += _table([*path, key], sub)
    return lines


def _pair(key: str, value: Any) -> str:
    return f"{_key(key)} = {_value(value)}"


def _key(key: str) -> str:
    # Model ids are quoted, as in the shipped file; fact names are bare.
    bare = key.replace("_", "").isalnum() and key.isascii()
    return key if bare else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(_pair(k, v) for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")  # pragma: no cover


def _string(text: str) -> str:
    # A JSON string is a TOML basic string, except that TOML wants DEL escaped too.
    return json.dumps(text, ensure_ascii=True).replace("\x7f", "\\u007f")


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list | tuple | frozenset):
        return "[" + ",".join(str(v) for v in value) + "]" if value else "[]"
    if isinstance(value, date):
        return value.isoformat()
    return value if isinstance(value, str) else str(value).lower()
