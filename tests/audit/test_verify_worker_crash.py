"""A verify worker that dies mid-walk (killed, out of memory) ends the verify with one clear
error, never a hang or a report that looks complete, and leaves the log as it was."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.errors import DatabaseUnavailable
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify import verify_log

pytestmark = pytest.mark.slow  # verify's worker processes, on a large log

EVENTS = 60_000  # with every signature checked: about a second of two workers' time


def _workers(module: str = "audit.verify._range_worker") -> list[int]:
    """This process's verify workers running ``module`` (their command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")),
            None,
        )
        if parent == os.getpid() and module.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
@pytest.mark.parametrize(
    ("jobs", "module", "said"),
    [
        (2, "audit.verify._range_worker", "a verify worker could not check its pages"),
        (1, "_signature_worker.py", "a verify worker checking record signatures stopped"),
    ],
    ids=["range-walk", "signature-pool"],
)
def test_a_worker_killed_mid_walk_ends_verify_with_one_clear_error(
    tmp_path: Path, jobs: int, module: str, said: str
) -> None:
    signer = Signer.from_text("44" * 32)
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, "os", signer=signer) as store:
        for start in range(0, EVENTS, 5000):
            store.append_many(
                [
                    EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}")
                    for n in range(start, start + 5000)
                ]
            )
    trust = Trust(TrustedKeys.of([signer.public_key]))
    outcome: dict[str, object] = {}

    def walk() -> None:
        with AuditStore.open(url, "os") as store:
            try:
                outcome["report"] = verify_log(store, jobs=jobs, trust=trust)
            except DatabaseUnavailable as exc:
                outcome["error"] = exc

    walker = threading.Thread(target=walk)
    walker.start()
    deadline = time.monotonic() + 60
    while not (workers := _workers(module)) and walker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert workers, "verify finished before a worker could be killed: make the log larger"
    os.kill(workers[0], signal.SIGKILL)
    walker.join(timeout=120)
    assert not walker.is_alive(), "verify hung after its worker died"

    error = outcome.get("error")
    assert isinstance(error, DatabaseUnavailable), outcome
    message = str(error)
    assert said in message
    assert "\n" not in message
    assert error.hint
    assert _workers(module) == []  # the other worker was stopped too

    with AuditStore.open(url, "os") as store:  # nothing was changed: it verifies intact
        report = verify_log(store, jobs=1, trust=trust)
    assert report.ok and report.events_checked == EVENTS
