"""Hold the SQLite write lock from another process: ``python lock_holder.py DB``.

Takes ``BEGIN IMMEDIATE``, prints ``locked`` (flushed), holds the lock until a line arrives
on stdin, then rolls back and exits. Uses only the standard library, so it starts fast.
"""

from __future__ import annotations

import sqlite3
import sys


def main(path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    conn.close()


if __name__ == "__main__":
    main(sys.argv[1])
