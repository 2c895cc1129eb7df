"""This machine's fsync latency on the project disk, the floor under durability ``fsync``.

    $ .venv/bin/python bench/fsync_probe.py                 # 200 rounds in bench/
    $ .venv/bin/python bench/fsync_probe.py --rounds 1000 --dir /tmp

    from bench.fsync_probe import probe
    figures = probe(Path("bench"), rounds=200)   # {"fsync": {"p50": ..., "p99": ...}, ...}

Three figures, each a p50/p99/mean in milliseconds over ``rounds`` samples: ``os.fsync`` and
``os.fdatasync`` after a 4 KiB append (what a journal write costs), and one SQLite WAL commit
of a 600-byte row with ``synchronous=FULL`` (the audit store's ``fsync`` durability) and with
``synchronous=NORMAL`` (its ``os`` durability, which does not sync on commit). The probe files
live in a temporary folder under ``--dir`` and are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["probe", "summarise"]

BLOCK = b"x" * 4096


def summarise(samples_ms: list[float]) -> dict[str, float]:
    """p50, p99 and mean of millisecond samples, rounded to microseconds."""
    ordered = sorted(samples_ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(p99, 3),
        "mean": round(statistics.fmean(ordered), 3),
    }


def _file_sync(path: Path, rounds: int, sync: Callable[[int], None]) -> list[float]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    samples = []
    try:
        for _ in range(rounds):
            os.write(fd, BLOCK)
            start = time.perf_counter()
            sync(fd)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
    return samples


def _sqlite_commit(path: Path, rounds: int, synchronous: str) -> list[float]:
    conn = sqlite3.connect(path, isolation_level=None)
    samples = []
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER PRIMARY KEY, body BLOB)")
        for _ in range(rounds):
            # The whole transaction is timed: that is what one audit append waits for.
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO probe (body) VALUES (?)", (os.urandom(600),))
            conn.execute("COMMIT")
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        conn.close()
    return samples


def probe(folder: Path, rounds: int = 200) -> dict[str, dict[str, float]]:
    """Measure in a temporary folder under ``folder`` (so on that folder's disk)."""
    with tempfile.TemporaryDirectory(prefix="fsync-probe-", dir=folder) as work:
        base = Path(work)
        return {
            "fsync": summarise(_file_sync(base / "fsync.probe", rounds, os.fsync)),
            "fdatasync": summarise(_file_sync(base / "fdatasync.probe", rounds, os.fdatasync)),
            "sqlite_commit_full": summarise(_sqlite_commit(base / "full.db", rounds, "FULL")),
            "sqlite_commit_normal": summarise(_sqlite_commit(base / "normal.db", rounds, "NORMAL")),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument(
        "--dir", type=Path, default=Path(__file__).resolve().parent, help="folder on the disk"
    )
    args = parser.parse_args()
    figures = probe(args.dir, args.rounds)
    for name, row in figures.items():
        print(
            f"{name:<22} p50 {row['p50']:7.3f} ms  p99 {row['p99']:7.3f} ms  "
            f"mean {row['mean']:7.3f} ms"
        )
    print(json.dumps({"dir": str(args.dir.resolve()), "rounds": args.rounds, **figures}))


if __name__ == "__main__":
    main()
