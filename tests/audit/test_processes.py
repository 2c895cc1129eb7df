"""Several processes append at once: one gap-free chain; a killed process loses nothing acked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit import AuditStore
from audit.verify import verify_log

pytestmark = pytest.mark.slow  # writer processes

WORKER = Path(__file__).with_name("append_worker.py")
PROCESSES, APPENDS = 8, 250


def _spawn(url: str, name: str, count: int, durability: str = "fsync") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, name, str(count), durability],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_eight_processes_make_one_gap_free_chain(any_url: str) -> None:
    AuditStore.open(any_url).close()  # create (SQLite) before the race, as a deploy would
    # Durability "os": this test is about the chain lock across processes, not about fsync,
    # and it keeps 2,000 serialised commits within the suite's time budget.
    workers = [_spawn(any_url, f"p{i}", APPENDS, "os") for i in range(PROCESSES)]
    acked: list[int] = []
    for w in workers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
        acked += [int(line) for line in out.split()]
    total = PROCESSES * APPENDS
    assert sorted(acked) == list(range(1, total + 1))
    with AuditStore.open(any_url) as store:
        report = verify_log(store)
        assert report.ok, report.defects[:3]
        assert report.head_seq == total
        ids = {e.request_id for e in store.iter_events()}
    assert ids == {f"p{i}-{n}" for i in range(PROCESSES) for n in range(APPENDS)}


def test_kill_9_mid_stream_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()
    worker = _spawn(url, "victim", 100_000)
    assert worker.stdout is not None
    acked: list[int] = []
    deadline = time.monotonic() + 30
    while len(acked) < 200 and time.monotonic() < deadline:
        acked.append(int(worker.stdout.readline()))
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    worker.stdout.close()
    assert worker.stderr is not None
    worker.stderr.close()
    assert len(acked) == 200
    with AuditStore.open(url) as store:
        report = verify_log(store)
        assert report.ok
        present = {e.seq for e in store.iter_events()}
    assert set(acked) <= present
