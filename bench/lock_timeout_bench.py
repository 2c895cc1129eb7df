"""How long appenders queued behind a held chain lock take to fail: a batch fails at once.

    $ .venv/bin/python bench/lock_timeout_bench.py [--writers 8] [--lock-timeout 1] [--runs 3]

Another writer holds SQLite's write lock (BEGIN IMMEDIATE on a raw connection) while
``--writers`` threads append to one store opened with ``lock_timeout``. The first append leads
a group that waits out the timeout; the others queue behind it and fail as one batch when it
does. The figure is the time until the last of them has failed, as a multiple of the lock
timeout: about 2 (two batches). Retried one by one, each waiting its own timeout, it would be
about ``writers`` + 1. tests/audit/test_group_commit.py checks the number of batches; this
measures the wall time, which a loaded machine stretches.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit import AppendFailed, AuditStore, EventDraft, EventKind


def one_run(folder: Path, writers: int, lock_timeout: float) -> tuple[float, int]:
    """Seconds until the last writer failed, and the store's group commits meanwhile."""
    path = folder / f"audit-{time.monotonic_ns()}.db"
    url = f"sqlite:///{path}"
    AuditStore.open(url).close()  # migrated before the lock is taken
    failed_after: list[float] = []
    lock = threading.Lock()
    with AuditStore.open(f"{url}?lock_timeout={lock_timeout}") as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            start = time.monotonic()

            def append(n: int) -> None:
                try:
                    store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}"))
                except AppendFailed:
                    with lock:
                        failed_after.append(time.monotonic() - start)

            threads = [threading.Thread(target=append, args=(n,)) for n in range(writers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert len(failed_after) == writers, failed_after
        return max(failed_after), store.group_commits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--lock-timeout", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lock-timeout-bench-") as folder:
        results = [one_run(Path(folder), args.writers, args.lock_timeout) for _ in range(args.runs)]
    lasts = [last for last, _ in results]
    median = statistics.median(lasts)
    print(f"writers={args.writers} lock_timeout={args.lock_timeout:g} s runs={args.runs}")
    print(f"last failure after: median {median:.2f} s, max {max(lasts):.2f} s")
    print(f"as a multiple of the lock timeout: {median / args.lock_timeout:.2f} (about 2 expected)")
    print(f"group commits per run: {[commits for _, commits in results]}")


if __name__ == "__main__":
    main()
