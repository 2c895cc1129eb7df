"""Purge on PostgreSQL, log format 1 against format 2: requests erased per second.

    $ .venv/bin/python bench/purge_format2_bench.py --requests 10000 --rounds 3

The same log as bench/purge_bench.py (N expired requests, a REQUEST and a RESPONSE each,
every fourth request body a repeat), built once in format 1 and once in format 2 (format 2
begun on the empty log, so every event is sequenced); then one purge of each in a fresh
process, the two interleaved round by round on one server, so load on the shared machine
falls on both. On format 2 the erasure events are appended 16 at a time (what
``audit_reserve()`` grants the eraser role), against 200 a transaction on format 1. Prints
each round, the ratio of format 2's requests/s to format 1's, and JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from purge_bench import build, purge  # noqa: E402  (bench/ is on the path only now)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from audit import AuditStore
    from audit.store.migrate import upgrade
    from tests.support.postgres import running_postgres

    results: list[dict[str, Any]] = []
    with running_postgres() as server:
        for round_no in range(1, args.rounds + 1):
            for log_format in (1, 2) if round_no % 2 else (2, 1):
                url = server.url(server.create_database())
                upgrade(url)
                if log_format == 2:
                    AuditStore.open(url, log_format=2).close()
                build(url, args.requests)
                load = os.getloadavg()[0]
                r = {"round": round_no, "format": log_format, "load": load, **purge(url)}
                results.append(r)
                print(
                    f"round {round_no} format {log_format}: {r['erased']} erased in "
                    f"{r['seconds']:.1f} s ({r['erased'] / r['seconds']:.0f} requests/s), peak "
                    f"RSS {r['peak_rss_mb']:.0f} MB, no-op rerun {r['again_seconds']:.1f} s, "
                    f"load {load:.1f}",
                    flush=True,
                )
    for round_no in range(1, args.rounds + 1):
        rate = {r["format"]: r["erased"] / r["seconds"] for r in results if r["round"] == round_no}
        print(f"round {round_no}: format 2 / format 1 requests/s = {rate[2] / rate[1]:.2f}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
