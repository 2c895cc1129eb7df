"""The audit store: open a database, append events, read and find them.

from audit.store import AuditStore
with AuditStore.open("sqlite:///gateway-audit.db") as store:
    store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1"))

Each name loads on first use, so that importing one of the room's modules (the typed values in
``audit.store.models``, say) does not import the store, SQLAlchemy's engine and Alembic.
"""

import typing as _typing

from audit.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from audit.store._follow import LogFollower
    from audit.store._opening import missing_database, sqlite_path
    from audit.store._reads import UNREADABLE, EventKey
    from audit.store._store import AuditStore

# Where each name that loads on first use lives.
_LAZY = {
    "LogFollower": "audit.store._follow",
    "missing_database": "audit.store._opening",
    "sqlite_path": "audit.store._opening",
    "UNREADABLE": "audit.store._reads",
    "EventKey": "audit.store._reads",
    "AuditStore": "audit.store._store",
}

__all__ = [
    "UNREADABLE",
    "AuditStore",
    "EventKey",
    "LogFollower",
    "missing_database",
    "sqlite_path",
]


__getattr__ = _lazy_names(__name__, _LAZY)
