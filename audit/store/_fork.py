"""Fork safety: reset an object's connections and locks in a child process after ``fork()``.

    on_fork_child(store, AuditStore._after_fork_in_child)  # runs in each child while store lives
    abandon(inherited_connection)                           # in the child: never used, never closed

A child of ``fork()`` gets a copy of every connection and lock of its parent, but only the
thread that forked. A lock another thread held at that instant stays held forever, and a
connection the parent goes on using must not be used by the child too. Worse for SQLite, it
must not even be *closed* in the child: ``sqlite3_close`` may roll back or clean up state
that belongs to the parent (SQLite's "How To Corrupt Your Database Files", section 2.6), and
it may block forever on a mutex held by a thread that does not exist in the child. Closing
a PostgreSQL connection in the child would end the parent's session. So a child sets such
objects aside with :func:`abandon`, which keeps them alive until the process ends, even
through interpreter shutdown (which would otherwise deallocate them, and so close them).
"""

from __future__ import annotations

import ctypes
import os
import weakref
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Objects a child inherited and must never close. The list itself is given one reference that
# is never released, so shutdown (which clears module globals) cannot deallocate it or them.
_ABANDONED: list[object] = []
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_ABANDONED))


def abandon(obj: object) -> None:
    """Keep ``obj`` (an inherited connection or pool) alive and untouched until the end."""
    _ABANDONED.append(obj)


def on_fork_child(owner: T, reset: Callable[[T], None]) -> None:
    """Call ``reset(owner)`` in every child forked while ``owner`` is alive.

    Registered once per owner. Only a weak reference is kept, so the owner can be garbage
    collected; ``os.register_at_fork`` has no way to unregister, so what stays behind is a
    small function that does nothing once the owner is gone.
    """
    ref = weakref.ref(owner)

    def _after_fork_in_child() -> None:
        alive = ref()
        if alive is not None:
            reset(alive)

    os.register_at_fork(after_in_child=_after_fork_in_child)
