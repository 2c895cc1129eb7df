"""Each package's ``__all__`` is exactly its public names (httpx's tests/test_exported_members.py).

A package's face lists what its users import: a public name defined or imported in its
``__init__.py`` and missing from ``__all__``, or listed and not there, fails here. Submodules
are not members: Python sets them on the package as they are imported.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

PACKAGES = sorted(
    ".".join(init.parent.relative_to(ROOT).parts)
    for top in ("gateway", "audit")
    for init in (ROOT / top).rglob("__init__.py")
    if "_migrations" not in init.parts
)


def _is_submodule(package: ModuleType, value: object) -> bool:
    return isinstance(value, ModuleType) and value.__name__.startswith(package.__name__ + ".")


@pytest.mark.parametrize("name", PACKAGES)
def test_all_imports_are_exported(name: str) -> None:
    package = importlib.import_module(name)
    for member in package.__all__:  # a name a package loads on first use, loaded now
        getattr(package, member, None)
    public = [
        member
        for member, value in vars(package).items()
        if not member.startswith("_") and not _is_submodule(package, value)
    ]
    assert sorted(package.__all__) == sorted(public)


def test_every_package_is_checked() -> None:
    rooms = {"audit", "audit.store", "audit.verify", "audit.proofs", "audit.sequenced"}
    rooms |= {"gateway", "gateway.request", "gateway.evidence", "gateway.keys"}
    assert rooms <= set(PACKAGES)
