"""A store opened and used before fork() works in the children, and the parent is unaffected.

Real forks, on SQLite and PostgreSQL: children append beside the parent into one gap-free
chain; and a fork while a parent thread's append waits for the chain lock (its group-commit
state, writer lock and connection are mid-use) leaves the child able to append once the lock
is free, or to fail closed within its time-out, but never to hang.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.verify import verify_log

WORKER = Path(__file__).with_name("fork_worker.py")
CHILDREN, APPENDS = 3, 50


def _append_all(store: AuditStore, name: str) -> None:
    for n in range(APPENDS):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"{name}-{n}", data={"n": n}))


def test_children_forked_after_use_append_into_one_chain_beside_the_parent(any_url: str) -> None:
    store = AuditStore.open(any_url, "os")  # os: the test is about forks, not fsync
    store.append(EventDraft(kind=EventKind.REQUEST, request_id="before-fork"))
    assert verify_log(store).ok  # the reader pool holds connections as well as the writer
    fork = multiprocessing.get_context("fork")
    children = [fork.Process(target=_append_all, args=(store, f"c{i}")) for i in range(CHILDREN)]
    for child in children:
        child.start()
    _append_all(store, "parent")  # at the same time, on the parent's own connections
    for child in children:
        child.join(timeout=120)
        if child.is_alive():
            child.kill()
        assert child.exitcode == 0
    store.append(EventDraft(kind=EventKind.REQUEST, request_id="after-fork"))
    report = verify_log(store)
    total = 2 + (CHILDREN + 1) * APPENDS
    assert report.ok, report.defects[:3]
    assert report.head_seq == report.events_checked == total
    ids = {e.request_id for e in store.iter_events()}
    store.close()
    names = [f"c{i}" for i in range(CHILDREN)] + ["parent"]
    assert ids == {"before-fork", "after-fork"} | {
        f"{p}-{n}" for p in names for n in range(APPENDS)
    }


def _run_worker(url: str, mode: str, lock_timeout: int) -> dict[str, object]:
    sep = "&" if "?" in url else "?"
    done = subprocess.run(
        [sys.executable, str(WORKER), f"{url}{sep}lock_timeout={lock_timeout}", mode],
        capture_output=True,
        text=True,
        timeout=60,  # a hang in parent or child (a lock held from before the fork) fails here
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


@pytest.mark.slow
def test_fork_during_a_waiting_append_leaves_the_child_able_to_append(any_url: str) -> None:
    out = _run_worker(any_url, "release", lock_timeout=10)
    assert out["child_exit"] == 0
    [child] = out["child"]  # type: ignore[misc]
    assert isinstance(child["seq"], int), child
    waiting = out["parent_waiting"]
    assert isinstance(waiting, dict) and isinstance(waiting["seq"], int), waiting
    assert out["ok"] is True
    assert out["head"] == 4
    assert out["ids"] == ["child-0", "parent-0", "parent-after", "parent-waiting"]


@pytest.mark.slow
def test_fork_during_a_waiting_append_child_fails_closed_while_the_lock_is_held(
    any_url: str,
) -> None:
    out = _run_worker(any_url, "hold", lock_timeout=1)
    assert out["child_exit"] == 0
    first, second = out["child"]  # type: ignore[misc]
    assert first["seq"] == "AppendFailed", first
    assert first["seconds"] < 1 + 5, first  # its own lock time-out, not someone else's
    assert isinstance(second["seq"], int), second
    assert out["ok"] is True
    ids = out["ids"]
    assert isinstance(ids, list) and {"child-1", "parent-0", "parent-after"} <= set(ids)
    assert "child-0" not in ids
    assert out["head"] == len(ids)
