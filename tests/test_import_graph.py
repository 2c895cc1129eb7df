"""The import graph of ``gateway/`` and ``audit/``: no circle, no import hidden in a function
in ``audit/``, and no module of another package's private part imported.

Every import statement counts, wherever it stands (under ``if TYPE_CHECKING:`` or in a
function too). Importing ``a.b.c`` from outside package ``a.b`` runs ``a/b/__init__.py``
first, so it is an arrow to that package as well: a circle through a package's face
(its ``__init__``) is a circle.

The private rule: a module ``a.b._c``, or anything under a private package ``a.b._c/``,
may be imported only by modules inside package ``a.b``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "audit")

# Imports in a function in audit/ that are allowed, each with the reason: an optional
# dependency, or a library a reading command never uses and would pay for at every start
# (bench/cli_start_bench.py). (module importing, module imported) -> why.
_KEYS_ON_FIRST_USE = "cryptography (a tenth of `gateway audit list`'s start) at the first key use"
OPTIONAL_IMPORTS: dict[tuple[str, str], str] = {
    ("audit.proofs.checkpoint_key", "cryptography.hazmat.primitives.asymmetric.ed25519"): (
        _KEYS_ON_FIRST_USE
    ),
    ("audit.store.signing", "cryptography.hazmat.primitives.asymmetric"): _KEYS_ON_FIRST_USE,
    ("audit.store.signing", "cryptography.exceptions"): _KEYS_ON_FIRST_USE,
}

# Imports of another package's private module in gateway/ that are known and not yet mended:
# (importing module, imported module). Each is to be moved behind a public name, and this
# list emptied.
PRIVATE_IMPORTS_TO_MEND: frozenset[tuple[str, str]] = frozenset()

# Circles known and not yet broken (each a sorted list of modules), to be emptied.
CIRCLES_TO_BREAK: list[list[str]] = []


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "_migrations" in relative.parts:  # audit/_migrations: alembic's, not audit's
                continue
            parts = relative.with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _package_of(name: str) -> str:
    return name if _is_package(name) else name.rpartition(".")[0]


def _imports(name: str) -> Iterator[tuple[ast.stmt, str, bool]]:
    """(statement, module imported, whether the statement is inside a function)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function.update(id(inner) for inner in ast.walk(node) if inner is not node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name, id(node) in in_function
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = _package_of(name).split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield node, sub if sub in MODULES else base, id(node) in in_function


def _ours(target: str) -> str | None:
    """The module of ours that ``target`` names, or the nearest package of ours above it."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _arrows(name: str) -> set[str]:
    arrows: set[str] = set()
    for _, target, _ in _imports(name):
        ours = _ours(target)
        if ours is None:
            continue
        arrows.add(ours)
        # Each package above the target that does not hold the importer runs first.
        parts = ours.split(".")
        for end in range(1, len(parts)):
            package = ".".join(parts[:end])
            if not (name == package or name.startswith(package + ".")):
                arrows.add(package)
    arrows.discard(name)
    return arrows


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def _private_owner(target: str) -> str | None:
    """The package whose private part ``target`` is in (None: nothing private in its path)."""
    parts = target.split(".")
    for at, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:at])
    return None


def test_no_import_circles() -> None:
    graph = {name: _arrows(name) for name in MODULES}
    circles = _circles(graph)
    assert [c for c in circles if c not in CIRCLES_TO_BREAK] == []
    assert [c for c in CIRCLES_TO_BREAK if c not in circles] == []  # broken: strike it here


def test_the_graph_is_read_as_python_runs_it() -> None:
    # A deliberately small check that the walk sees what Python does: the audit package's
    # face imports the store's, and a module importing across packages runs that face.
    assert "audit.store" in _arrows("audit")
    assert "audit.store" in _arrows("audit.verify._walk")
    assert _circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_audit_imports_nothing_inside_a_function() -> None:
    hidden = [
        (name, target, node.lineno)
        for name in MODULES
        if name.startswith("audit")
        for node, target, in_function in _imports(name)
        if in_function and (name, target) not in OPTIONAL_IMPORTS
    ]
    assert hidden == []


def test_no_module_imports_another_package_private_module() -> None:
    broken = set()
    for name in MODULES:
        for _, target, _ in _imports(name):
            if _ours(target) is None:
                continue
            owner = _private_owner(target)
            if owner is None or name == owner or name.startswith(owner + "."):
                continue
            broken.add((name, target))
    assert sorted(broken - PRIVATE_IMPORTS_TO_MEND) == []


def test_the_list_of_private_imports_to_mend_holds_only_what_is_still_there() -> None:
    there = {(name, target) for name in MODULES for _, target, _ in _imports(name)}
    assert sorted(PRIVATE_IMPORTS_TO_MEND - there) == []


def test_no_module_is_over_500_lines() -> None:
    # Past ~400 lines a module is usually two things (STYLE.md); 500 is where it must split.
    long = {
        name: lines
        for name, path in MODULES.items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}
