"""Format-2 verify with and without `--checkpoint FILE` of a format-2 head, interleaved.

    $ .venv/bin/python bench/sequenced_checkpoint_bench.py --events 50000 --rounds 4

Builds the log bench/sequenced_verify_bench.py builds (a throwaway PostgreSQL server), takes
`audit checkpoint` of its integrated head, then each round runs `verify_log(store)` in a fresh
process without the file and with it, alternating which goes first, and prints wall and CPU
time of each and the with/without ratios beside the load average (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sequenced_verify_bench import INTEGRATOR_KEY, WRITER_KEY, build  # noqa: E402

from audit import AuditStore  # noqa: E402
from audit.proofs import checkpoint as cp  # noqa: E402
from audit.sequenced import integrated_checkpoint  # noqa: E402
from audit.store.signing import Signer  # noqa: E402
from tests.support.postgres import running_postgres  # noqa: E402

CHECKPOINT_KEY = "77" * 32

# One verify in a fresh process ("-": without a checkpoint file), its times as JSON.
CHILD = """
import json, sys, time
from audit import AuditStore
from audit.proofs import checkpoint as cp
from audit.store.signing import Signer, Trust, TrustedKeys
try:
    from audit.verify import verify_log
except ImportError:  # a tree from before audit.verify, whose store verified itself
    def verify_log(store, *args, **kwargs):
        return store.verify(*args, **kwargs)
url, path = sys.argv[1], sys.argv[2]
head = cp.loads(open(path).read()) if path != "-" else None
trust = Trust(TrustedKeys.of([Signer.from_text("01" * 32).public_key]),
              integrator=TrustedKeys.of([Signer.from_text("5e" * 32).public_key]))
with AuditStore.open(url) as store:
    t0, c0 = time.perf_counter(), time.process_time()
    report = verify_log(store, checkpoint=head, trust=trust, jobs=1)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"ok": report.ok, "events": report.events_checked, "wall": wall, "cpu": cpu,
                  "checkpoint_seq": report.checkpoint_seq}))
"""


def measure(url: str, path: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, path],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with running_postgres() as server, tempfile.TemporaryDirectory() as tmp:
        url = server.url(server.create_database())
        build(url, args.events)
        integrator = Signer.from_text(INTEGRATOR_KEY).public_key
        with AuditStore.open(url, signer=Signer.from_text(WRITER_KEY)) as store:
            head = integrated_checkpoint(store, bytes.fromhex(CHECKPOINT_KEY), [integrator])
        path = Path(tmp) / "head.json"
        path.write_text(cp.dumps(head))
        runs = [("without", "-"), ("with", str(path))]
        for n in range(args.rounds):
            res = {name: measure(url, arg) for name, arg in (runs if n % 2 == 0 else runs[::-1])}
            load = Path("/proc/loadavg").read_text().split()[:3]
            ratios = {
                f"{what}_ratio": round(res["with"][what] / res["without"][what], 3)
                for what in ("wall", "cpu")
            }
            print(json.dumps({"round": n + 1, "load": load, **res, **ratios}))


if __name__ == "__main__":
    main()
