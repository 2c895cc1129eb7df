"""CPU time of a sync record-mode miss against the raw SDK call, alternating, in one process.

    .venv/bin/python bench/miss_cpu_bench.py [--calls 1500]
    cd /tmp/base && /work/main/.venv/bin/python /work/main/bench/miss_cpu_bench.py  # a baseline

Latency on a shared machine moves with load; the calling thread's CPU time per call
(``time.thread_time``) moves much less, so it shows what a change to the per-request work
saved. Appends run on the calling thread at c=1 (the group committer's leader is the
caller), so the audit writes are counted; the fake Messages API runs in its own process and
is not. The gateway is imported from the current directory's tree.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())

import anthropic
import structlog

import gateway
from bench.gateway_bench import API_KEY, PROMPT, fake_api, raw_kwargs, write_policies
from gateway import Gateway
from gateway.logging import configure_logging


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--warmup", type=int, default=50)
    args = ap.parse_args()
    configure_logging()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=devnull))
    print("gateway from", gateway.__file__, file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gw-cpu-") as tmp, fake_api(False) as url:
        work = Path(tmp)
        write_policies(work / "policies")
        gw = Gateway(
            policy_dir=work / "policies",
            database_url=f"sqlite:///{work / 'audit.db'}",
            anthropic_api_key=API_KEY,
            base_url=url,
            durability="os",
        )
        raw = anthropic.Anthropic(api_key=API_KEY, base_url=url, max_retries=0)
        body = raw_kwargs(PROMPT)
        miss = direct = 0.0
        for n in range(args.warmup + args.calls):
            t0 = time.thread_time()
            gw.complete("bench_record", PROMPT, caller="bench")
            t1 = time.thread_time()
            raw.messages.create(**body)
            t2 = time.thread_time()
            if n >= args.warmup:
                miss += t1 - t0
                direct += t2 - t1
        raw.close()
        gw.close()
    per = 1e6 / args.calls
    print(
        f"CPU per call (us): miss {miss * per:.0f}, raw SDK {direct * per:.0f}, "
        f"added {(miss - direct) * per:.0f}; load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
