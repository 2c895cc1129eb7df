"""CPU time of AsyncGateway replay misses (distinct requests under a ``replay`` policy), one
at a time, in one process: the event loop's and the audit threads' together.

    .venv/bin/python bench/async_miss_bench.py [--calls 600]
    cd /tmp/base && /work/main/.venv/bin/python /work/main/bench/async_miss_bench.py

A replay miss is planned, looked up (a miss), looked up again under its request's lock, sent
and recorded. The process's CPU time per call (``time.process_time``: loop and worker
threads) moves much less with the machine's load than latency does; the fake Messages API
runs in its own process and is not counted. Compare two trees by running this alternately
from each (interleaved rounds), as ratios. The gateway is imported from the current
directory's tree.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())

import structlog

import gateway
from bench.gateway_bench import API_KEY, PROMPT, fake_api, write_policies
from gateway import AsyncGateway
from gateway.logging import configure_logging


async def _run(url: str, work: Path, calls: int, warmup: int) -> tuple[float, float]:
    async with AsyncGateway(
        policy_dir=work / "policies",
        database_url=f"sqlite:///{work / 'audit.db'}",
        anthropic_api_key=API_KEY,
        base_url=url,
        durability="os",
    ) as gw:
        cpu = wall = 0.0
        for n in range(warmup + calls):
            prompt = f"{PROMPT} (request {n})"  # distinct: every call is a miss
            c0, w0 = time.process_time(), time.perf_counter()
            result = await gw.complete("bench_replay", prompt, caller="bench")
            c1, w1 = time.process_time(), time.perf_counter()
            assert not result.cached
            if n >= warmup:
                cpu += c1 - c0
                wall += w1 - w0
        return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--warmup", type=int, default=50)
    args = ap.parse_args()
    configure_logging()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=devnull))
    print("gateway from", gateway.__file__, file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gw-amiss-") as tmp, fake_api(False) as url:
        work = Path(tmp)
        write_policies(work / "policies")
        cpu, wall = asyncio.run(_run(url, work, args.calls, args.warmup))
    per = 1e6 / args.calls
    print(
        json.dumps(
            {
                "cpu_us": round(cpu * per),
                "wall_us": round(wall * per),
                "load": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
