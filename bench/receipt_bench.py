"""What `audit prove` costs per receipt, this tree against a baseline tree, interleaved.

    $ mkdir -p /tmp/baseline && git archive <commit> | tar -x -C /tmp/baseline
    $ .venv/bin/python bench/receipt_bench.py --baseline /tmp/baseline --events 100000

Two logs of ``--events`` real events (requests of a REQUEST and a RESPONSE, written by the
real store): a format-1 log on SQLite, and a format-2 log on a throwaway PostgreSQL
(tests/support/postgres.py) integrated by the real integrator. Each round runs one worker
process per tree and log, in alternating order, that proves ``--proofs`` requests spread
over the log and reports the time of each (the stored tree is caught up first, so a round
times the proofs, not the first build). Format 1: ``make_receipt`` (checkpoint key); format
2: this tree's ``make_integrated_receipt`` (the integrator's checkpoint), the baseline's
``make_receipt`` (which on format 2 signed the stored tree's root). Timings on a shared
machine are noisy: read the ratios, and the load averages printed with them. Results are
written as JSON under bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from audit import AuditStore, EventDraft, EventKind  # noqa: E402
from audit.store.migrate import upgrade  # noqa: E402
from audit.store.signing import Signer  # noqa: E402

CHECKPOINT_KEY = "11" * 32
INTEGRATOR_KEY = "5e" * 32
WRITER_KEY = "01" * 32

WORKER = r"""
import json, sys, time
from audit import AuditStore
url, log_format, ids = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
key = bytes.fromhex("11" * 32)
integrator = "%s"
with AuditStore.open(url) as store:
    if log_format == 2:
        try:
            from audit.sequenced.receipts import make_integrated_receipt
            prove = lambda rid: make_integrated_receipt(store, rid, [integrator])
        except ImportError:  # the baseline: signed the stored tree's root
            from audit.proofs.receipts import make_receipt
            prove = lambda rid: make_receipt(store, rid, key)
    else:
        from audit.proofs.receipts import make_receipt
        prove = lambda rid: make_receipt(store, rid, key)
    prove(ids[0])  # the stored tree caught up, connections open
    times = []
    for rid in ids:
        started = time.perf_counter()
        receipt = prove(rid)
        times.append((time.perf_counter() - started) * 1000)
        assert receipt.events
print(json.dumps(times))
"""


def _fill(store: AuditStore, requests: int) -> None:
    for at in range(0, requests, 500):
        drafts = []
        for n in range(at, min(at + 500, requests)):
            for kind in (EventKind.REQUEST, EventKind.RESPONSE):
                drafts.append(EventDraft(kind=kind, request_id=f"req-{n}", task="t", caller="c"))
        store.append_many(drafts)


def _prove_times(tree: Path, url: str, log_format: int, ids: list[str]) -> list[float]:
    integrator = Signer.from_text(INTEGRATOR_KEY).public_key
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env["PYTHONPATH"] = str(tree)
    done = subprocess.run(
        [sys.executable, "-c", WORKER % integrator, url, str(log_format), ",".join(ids)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    return [float(t) for t in json.loads(done.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--proofs", type=int, default=50)
    parser.add_argument("--baseline", type=Path, required=True, help="an older tree")
    args = parser.parse_args()
    from audit.sequenced.integrator import Integrator
    from tests.support.postgres import running_postgres

    requests = args.events // 2
    ids = [f"req-{(i * 7919) % requests}" for i in range(args.proofs)]
    trees = {"new": ROOT, "baseline": args.baseline.resolve()}
    loads = [os.getloadavg()]
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder, running_postgres() as server:
        sqlite_url = f"sqlite:///{Path(folder) / 'audit.db'}"
        with AuditStore.open(sqlite_url, signer=Signer.from_text(WRITER_KEY)) as store:
            _fill(store, requests)
        pg_url = server.url(server.create_database())
        upgrade(pg_url)
        AuditStore.open(pg_url, log_format=2).close()
        with AuditStore.open(pg_url, signer=Signer.from_text(WRITER_KEY)) as store:
            _fill(store, requests)
        with AuditStore.open(pg_url, log_format=2) as store:
            Integrator(store, bytes.fromhex(INTEGRATOR_KEY), checkpoint_every_s=0.0).run(
                0.05, threading.Event(), once=True
            )
        logs = {"format 1 (SQLite)": (sqlite_url, 1), "format 2 (PostgreSQL)": (pg_url, 2)}
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for name, (url, log_format) in logs.items():
                for tree in order:
                    key = f"{name}, {tree}"
                    times.setdefault(key, []).extend(
                        _prove_times(trees[tree], url, log_format, ids)
                    )
            loads.append(os.getloadavg())
    medians = {k: round(statistics.median(v), 2) for k, v in times.items()}
    result: dict[str, Any] = {
        "events": args.events,
        "proofs_per_round": args.proofs,
        "rounds": args.rounds,
        "loadavg_per_round": loads,
        "prove_ms_median": medians,
        "new_over_baseline": {
            name: round(medians[f"{name}, new"] / medians[f"{name}, baseline"], 2) for name in logs
        },
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / f"receipt-{args.events}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
