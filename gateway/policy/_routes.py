"""The routing table: which task answers a caller that names a real Claude model id.

    table, findings = load_routes(Path("policies"), catalog, served)   # routes.toml, reviewed
    table.route("desk-assistants", "claude-sonnet-4-6")                # -> Route, or None
    table.fingerprint                                                  # "sha256:<hex>"

``routes.toml`` sits in the policy folder beside the task files::

    schema = 1
    description = "Real model ids to tasks."
    owner = "compliance-engineering"

    [[route]]
    caller = "*"                  # any caller key, or one caller name
    model = "*"                   # any current catalog Claude model, or one model id
    task = "general_assistant"

The most specific route wins: a named caller before ``*``, then a named model before ``*``.
A route's model is a catalog Claude id that is not retired; ``*`` stands for every such id.
The table is reviewed like a policy (its findings join the folder's) and fingerprinted like
one (over its routes, description and owner), so approvals of the folder cover it under
the name :data:`ROUTES_TASK`. A table with an error finding does not load: no route answers.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.canonical import canonical_digest
from gateway.catalog import Catalog
from gateway.policy._findings import Finding, Severity, error, warning
from gateway.policy._folder import ROUTES_FILE
from gateway.providers.registry import runs_offline

ANY = "*"
MAX_ROUTES_CHARS = 256 * 1024
MAX_ROUTES = 1000

_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


class Route(BaseModel):
    model_config = _STRICT

    caller: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1, max_length=200)

    @property
    def specificity(self) -> tuple[bool, bool]:
        """Higher wins: a named caller first, then a named model."""
        return (self.caller != ANY, self.model != ANY)

    def describe(self) -> str:
        who = "any caller" if self.caller == ANY else f"caller {self.caller!r}"
        what = "any current Claude model" if self.model == ANY else self.model
        return f"{who} asking for {what} -> task {self.task!r}"


class RoutesFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    schema_version: Literal[1] = Field(alias="schema")
    description: str
    owner: str
    route: tuple[Route, ...] = Field(default=(), strict=False, max_length=MAX_ROUTES)


@dataclass(frozen=True)
class RouteTable:
    """The loaded table: its routes and the model ids ``*`` stands for."""

    file: RoutesFile
    current_models: frozenset[str]

    @property
    def routes(self) -> tuple[Route, ...]:
        return self.file.route

    def route(self, caller: str | None, model: str) -> Route | None:
        """The most specific route for ``caller`` asking for ``model``, or None."""
        found = [
            r
            for r in self.routes
            if r.caller in (caller, ANY)
            and (r.model == model or (r.model == ANY and model in self.current_models))
        ]
        return max(found, key=lambda r: r.specificity, default=None)

    def routes_for(self, caller: str | None) -> list[Route]:
        """The routes a caller may use (its own and the ``*`` ones), most specific first."""
        mine = [r for r in self.routes if r.caller in (caller, ANY)]
        return sorted(mine, key=lambda r: r.specificity, reverse=True)

    def content(self) -> dict[str, Any]:
        """What the fingerprint covers: routes in a fixed order (order never decides)."""
        routes = sorted(
            (r.model_dump() for r in self.routes), key=lambda r: (r["caller"], r["model"])
        )
        return {
            "kind": "routes",
            "schema": self.file.schema_version,
            "description": self.file.description,
            "owner": self.file.owner,
            "routes": routes,
        }

    @cached_property
    def fingerprint(self) -> str:
        return canonical_digest(self.content())


def current_claude_models(catalog: Catalog) -> frozenset[str]:
    """The ids ``*`` stands for: catalog models (pinned or alias) of a provider that calls
    out to Claude, not retired."""
    return frozenset(
        m.id for m in catalog if m.lifecycle != "retired" and not runs_offline(m.provider)
    )


def load_routes(
    policy_dir: Path, catalog: Catalog, served: Mapping[str, tuple[str, ...] | None]
) -> tuple[RouteTable | None, tuple[Finding, ...]]:
    """The folder's table (None when it has none or it has an error finding) and its
    findings. ``served``: each task file's models (pinned first, then its choices), or None
    for a task whose policy does not load."""
    path = policy_dir / ROUTES_FILE
    if not path.exists():
        return None, ()
    parsed, findings = _read(path)
    if parsed is None:
        return None, findings
    table = RouteTable(parsed, current_claude_models(catalog))
    findings = (*findings, *_review(table, catalog, served))
    if any(f.severity is Severity.ERROR for f in findings):
        return None, findings
    return table, findings


def _read(path: Path) -> tuple[RoutesFile | None, tuple[Finding, ...]]:
    try:
        with path.open(encoding="utf-8") as fh:
            text = fh.read(MAX_ROUTES_CHARS + 1)
        if len(text) > MAX_ROUTES_CHARS:
            raise ValueError(f"it is larger than {MAX_ROUTES_CHARS // 1024} KiB")
        raw = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = str(exc) or type(exc).__name__
        return None, (
            error(
                "routes-unreadable",
                ROUTES_FILE,
                "file",
                f"The routing table cannot be read: {reason}.",
                "Fix it: a UTF-8 TOML file with schema, description, owner and [[route]] "
                "tables (docs/policies.md, 'Routes').",
            ),
        )
    try:
        return RoutesFile.model_validate(raw), ()
    except ValidationError as exc:
        return None, tuple(_schema_finding(err) for err in exc.errors()[:20])


def _schema_finding(err: Any) -> Finding:
    key = ".".join(str(p) for p in err["loc"]) or "file"
    return error(
        "routes-invalid",
        ROUTES_FILE,
        key,
        f"The routing table's {key!r} is not usable: {err['msg']}.",
        "Each [[route]] has exactly caller, model and task (strings); the file has schema = 1, "
        "description and owner (docs/policies.md, 'Routes').",
    )


def _review(
    table: RouteTable, catalog: Catalog, served: Mapping[str, tuple[str, ...] | None]
) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for i, route in enumerate(table.routes):
        key = f"route[{i}]"
        pair = (route.caller, route.model)
        if pair in seen:
            findings.append(
                error(
                    "route-duplicate",
                    ROUTES_FILE,
                    key,
                    f"Two routes are for {route.describe().split(' -> ')[0]}; which one "
                    "answers would be a guess.",
                    "Keep one route per caller and model.",
                )
            )
        seen.add(pair)
        unknown_model = route.model != ANY and route.model not in table.current_models
        if unknown_model:
            info = catalog.get(route.model)
            why = (
                "is not in the model catalog"
                if info is None
                else "is retired"
                if info.lifecycle == "retired"
                else "is not a Claude model"
            )
            findings.append(
                error(
                    "route-model-unknown",
                    ROUTES_FILE,
                    f"{key}.model",
                    f"The route {route.describe()} names a model that {why}, so no client "
                    "can ask for it.",
                    "Name a current Claude model id from the catalog (gateway models list), "
                    "or '*' for any.",
                )
            )
        if route.task not in served:
            findings.append(
                error(
                    "route-unknown-task",
                    ROUTES_FILE,
                    f"{key}.task",
                    f"The route {route.describe()} names a task with no policy file.",
                    f"Add {route.task}.toml to the folder, or route to an existing task.",
                )
            )
            continue
        models = served[route.task]
        if models is None:
            findings.append(
                warning(
                    "route-task-refused",
                    ROUTES_FILE,
                    f"{key}.task",
                    f"The route {route.describe()} names a task whose policy does not load, "
                    "so every request it routes is refused.",
                    f"Fix the findings of {route.task}.toml.",
                )
            )
        elif route.model != ANY and not unknown_model and route.model not in models:
            findings.append(
                warning(
                    "route-model-substituted",
                    ROUTES_FILE,
                    f"{key}.model",
                    f"The route {route.describe()} names a model the task cannot use: it is "
                    f"answered by {models[0]}, the task's model, not by {route.model}.",
                    f"Add {route.model} to the task's [model] choices, or route it to a "
                    "task pinned to it.",
                )
            )
    return findings
