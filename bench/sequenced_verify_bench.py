"""Format-2 verify, before/after a change to its walk, interleaved on one log.

    $ git archive <old commit> | tar -x -C /tmp/verify-old
    $ .venv/bin/python bench/sequenced_verify_bench.py --before /tmp/verify-old --events 50000

Builds one PostgreSQL log (a throwaway server, tests/support/postgres.py): a few format-1
events, then format 2: REQUEST/RESPONSE pairs with a CACHE_HIT of the previous RESPONSE
every tenth pair, integrated (links and checkpoints). Then each round runs `verify_log(store)`
in a fresh process of each tree (``PYTHONPATH``), alternating which goes first, and reports
wall time, CPU time and max RSS of each, and the after/before ratios. The machine is
shared: read the ratios, and the load average printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from audit import AuditStore, EventDraft, EventKind  # noqa: E402
from audit.sequenced.integrator import Integrator  # noqa: E402
from audit.store.migrate import upgrade  # noqa: E402
from audit.store.signing import Signer  # noqa: E402
from tests.support.postgres import running_postgres  # noqa: E402

WRITER_KEY = "01" * 32
INTEGRATOR_KEY = "5e" * 32

# Run in the measured tree: one verify, its time, CPU and peak memory as JSON.
CHILD = """
import json, resource, sys, time
from audit import AuditStore
from audit.store.signing import Signer, Trust, TrustedKeys
try:
    from audit.verify import verify_log
except ImportError:  # a tree from before audit.verify, whose store verified itself
    def verify_log(store, *args, **kwargs):
        return store.verify(*args, **kwargs)
url = sys.argv[1]
trust = Trust(TrustedKeys.of([Signer.from_text("01" * 32).public_key]),
              integrator=TrustedKeys.of([Signer.from_text("5e" * 32).public_key]))
with AuditStore.open(url) as store:
    t0, c0 = time.perf_counter(), time.process_time()
    report = verify_log(store, trust=trust, jobs=1)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"ok": report.ok, "events": report.events_checked, "wall": wall,
                  "cpu": cpu, "rss_mb": rss, "defects": len(report.defects)}))
"""


def build(url: str, events: int) -> None:
    upgrade(url)
    signer = Signer.from_text(WRITER_KEY)
    with AuditStore.open(url, signer=signer) as store:
        for n in range(5):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"f1-{n}"))
            store.append(EventDraft(kind=EventKind.RESPONSE, request_id=f"f1-{n}"))
    AuditStore.open(url, log_format=2).close()
    with AuditStore.open(url, signer=signer) as store:
        last = None
        for n in range(events // 2):
            rhash = "sha256:" + f"{n % 1000:064x}"
            rid = f"r{n}"
            drafts = [
                EventDraft(kind=EventKind.REQUEST, request_id=rid, request_hash=rhash),
                EventDraft(kind=EventKind.RESPONSE, request_id=rid, request_hash=rhash),
            ]
            if last is not None and n % 10 == 0:
                seq, hsh, lrid, lhash = last
                drafts.append(
                    EventDraft(kind=EventKind.CACHE_HIT, request_id=f"hit{n}", request_hash=lhash,
                               data={"served_seq": seq, "served_hash": hsh,
                                     "served_request_id": lrid})
                )  # fmt: skip
            appended = store.append_many(drafts)
            last = (appended[1].seq, appended[1].hash, rid, rhash)
    with AuditStore.open(url, log_format=2) as store:
        Integrator(store, bytes.fromhex(INTEGRATOR_KEY), grace_s=0.2).run(
            0.05, threading.Event(), once=True
        )


def measure(tree: Path, url: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url], env=env, capture_output=True, text=True, check=True,
        cwd=tree,
    )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the old code's tree")
    parser.add_argument("--after", type=Path, default=ROOT, help="the new code's (default: here)")
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with running_postgres() as server:
        url = server.url(server.create_database())
        build(url, args.events)
        trees = [("before", args.before), ("after", args.after)]
        for n in range(args.rounds):
            results = {}
            for name, tree in trees if n % 2 == 0 else trees[::-1]:
                results[name] = measure(tree, url)
            b, a = results["before"], results["after"]
            load = Path("/proc/loadavg").read_text().split()[:3]
            print(json.dumps({"round": n + 1, "load": load, "before": b, "after": a,
                              "wall_ratio": round(a["wall"] / b["wall"], 3),
                              "cpu_ratio": round(a["cpu"] / b["cpu"], 3)}))  # fmt: skip


if __name__ == "__main__":
    main()
