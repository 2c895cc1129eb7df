"""The audit store: open a database, append events, read and find them.

from audit.store import AuditStore
with AuditStore.open("sqlite:///gateway-audit.db") as store:
    store.append(EventDraft(kind=EventKind.REQUEST, request_id="r1"))
"""

from audit.store._follow import LogFollower
from audit.store._opening import missing_database, sqlite_path
from audit.store._reads import UNREADABLE, EventKey
from audit.store._store import AuditStore

__all__ = [
    "UNREADABLE",
    "AuditStore",
    "EventKey",
    "LogFollower",
    "missing_database",
    "sqlite_path",
]
