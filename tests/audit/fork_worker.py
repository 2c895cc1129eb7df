"""Fork while an append waits for the chain lock: ``python fork_worker.py URL MODE``.

The parent opens a store and appends; another process holds the chain lock; a parent
thread's append waits for it; then the process forks. MODE ``release``: the holder lets go a
second after the fork, and parent thread and child must both append. MODE ``hold``: the
holder keeps the lock until the child's first append has failed closed (``AppendFailed``);
then it lets go and the child appends again. Both processes exit normally (interpreter
shutdown included). Prints one JSON line of outcomes; the test runs this with a time-out, so
a hang anywhere fails it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from audit import AppendFailed, AuditStore, EventDraft, EventKind
from audit.store.backend import CHAIN_LOCK_SQL
from audit.verify import verify_log


def _draft(rid: str) -> EventDraft:
    return EventDraft(kind=EventKind.REQUEST, request_id=rid, data={})


def _hold_chain_lock(url: str) -> None:
    """Take the lock an append needs, say so, and keep it until stdin has a line."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        conn: Any = sqlite3.connect(parsed.database or "", isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
    else:
        conn = psycopg.connect(
            host=parsed.host, port=parsed.port, dbname=parsed.database, user=parsed.username
        )
        conn.execute(CHAIN_LOCK_SQL)
    print("locked", flush=True)
    sys.stdin.readline()
    conn.rollback()
    conn.close()


def _holder(url: str) -> subprocess.Popen[str]:
    """The chain lock held by another process. (Not by a connection of this one: SQLite's
    lock bookkeeping is per process, so a child would inherit it as held - see docs/audit.md.)
    """
    proc = subprocess.Popen(
        [sys.executable, __file__, url, "hold-lock"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "locked\n"
    return proc


def _release(holder: subprocess.Popen[str]) -> None:
    holder.communicate("go\n", timeout=30)


def _append(store: AuditStore, rid: str) -> dict[str, Any]:
    start = time.monotonic()
    try:
        seq: int | str = store.append(_draft(rid)).seq
    except AppendFailed:
        seq = "AppendFailed"
    return {"rid": rid, "seq": seq, "seconds": round(time.monotonic() - start, 2)}


def _child(store: AuditStore, mode: str, report: int, go: int) -> None:
    first = _append(store, "child-0")
    os.write(report, (json.dumps(first) + "\n").encode())
    if mode == "hold":
        os.read(go, 1)  # the holder has let go
        second = _append(store, "child-1")
        os.write(report, (json.dumps(second) + "\n").encode())
    store.close()
    sys.exit(0)  # a normal exit: shutdown must not close or hang on inherited connections


def main(url: str, mode: str) -> None:
    store = AuditStore.open(url)
    store.append(_draft("parent-0"))
    verify_log(store)  # the reader pool holds connections too
    holder = _holder(url)
    waiting: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: waiting.update(_append(store, "parent-waiting")))
    before = store.group_commits
    thread.start()
    while store.group_commits == before:  # the thread leads a group: it is inside commit
        time.sleep(0.01)
    time.sleep(0.3)  # and now waits for the lock (busy handler / chain row lock)
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(store, mode, report_w, go_r)
    os.close(report_w)
    reports = os.fdopen(report_r)
    if mode == "release":
        time.sleep(1.0)
        _release(holder)
        outcomes = [json.loads(reports.readline())]
    else:
        outcomes = [json.loads(reports.readline())]  # the child failed closed, lock still held
        _release(holder)
        os.write(go_w, b"x")
        outcomes.append(json.loads(reports.readline()))
    thread.join()
    _, status = os.waitpid(pid, 0)
    after = _append(store, "parent-after")
    report = verify_log(store)
    ids = sorted(e.request_id for e in store.iter_events())
    store.close()
    print(
        json.dumps(
            {
                "child": outcomes,
                "child_exit": os.waitstatus_to_exitcode(status),
                "parent_waiting": waiting,
                "parent_after": after,
                "ok": report.ok,
                "head": report.head_seq,
                "ids": ids,
            }
        )
    )


if __name__ == "__main__":
    if sys.argv[2] == "hold-lock":
        _hold_chain_lock(sys.argv[1])
    else:
        main(sys.argv[1], sys.argv[2])
