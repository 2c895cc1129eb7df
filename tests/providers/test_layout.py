"""The providers package keeps its shape: small modules, no import circle, a wire layer that
knows no transport, and a seam that does not import the SDK.

Read from the source (ast), so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROVIDERS = ROOT / "gateway" / "providers"
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PROVIDERS.rglob("*.py"))}


def _imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    """The gateway.providers modules (and ``anthropic``) that ``path`` imports, anywhere in
    it (a function-level import is still an arrow), or at module level only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def test_no_module_in_providers_is_over_500_lines() -> None:
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_providers_has_no_import_circle() -> None:
    graph = _graph()
    circles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        for target in sorted(graph[name]):
            if target in path:
                circles.append([*path[path.index(target) :], target])
            else:
                visit(target, [*path, target])

    for start in sorted(graph):
        visit(start, [start])
    assert circles == []


def test_the_wire_layer_knows_no_transport_and_no_provider() -> None:
    transports = {
        "gateway.providers.anthropic",
        "gateway.providers.local",
        "gateway.providers.registry",
    }
    offenders = {
        name: sorted(imported & transports)
        for name, path in _modules().items()
        if name.startswith("gateway.providers.wire") and (imported := _imports(path)) & transports
    }
    assert offenders == {}


def test_the_seam_and_the_registry_do_not_import_the_sdk() -> None:
    # A command that never calls Claude must not pay the SDK's import (about a second).
    for name in ("gateway.providers.base", "gateway.providers.registry"):
        imported = _imports(_modules()[name], top_level_only=True)
        assert not {m for m in imported if m == "anthropic" or m.startswith("anthropic.")}, name
        assert not {m for m in imported if m.startswith("gateway.providers.wire")}, name
