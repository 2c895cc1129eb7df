"""Package faces whose names load on first use.

    __getattr__ = lazy_names(__name__, {"AuditStore": "audit.store._store", ...})

Importing a package then costs only its ``__init__``: a caller that needs one light name (a
typed value, say) does not pay for the store, SQLAlchemy's engine or the SDK behind the rest.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name from the module
    ``where`` names for it, once."""

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        # Once: later lookups find it in the package without calling this function.
        setattr(sys.modules[package], name, value)
        return value

    return load
