"""Merkle proofs from the stored tree (merkle_nodes) against the streamed computation.

    $ .venv/bin/python bench/merkle_bench.py                     # 1,000,000 events, SQLite
    $ .venv/bin/python bench/merkle_bench.py --events 200000 --rounds 7

The log is written straight into a migrated SQLite file (``seq`` and a 32-byte ``hash`` per
row: all the tree reads), then: the first build of the stored tree (every node, once), one
incremental extension after 1,000 more events, and, interleaved in each round, the same
inclusion proof plus root (a receipt's work) from the stored tree and from one streamed pass
over the hash column. Timings on a shared machine are noisy: read the ratio, and the load
average printed with it. Results are written as JSON under bench/out/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from audit import AuditStore  # noqa: E402
from audit.proofs.merkle import inclusion_path, scan  # noqa: E402
from audit.proofs.merkle_store import MerkleState  # noqa: E402
from audit.proofs.tree import log_leaves, tree_hashes  # noqa: E402


def _rows(start: int, end: int) -> Any:
    for seq in range(start, end + 1):
        digest = hashlib.sha256(seq.to_bytes(8, "big")).hexdigest()
        yield (seq, f"e{seq}", f"sha256:{digest}")


def _append(path: Path, start: int, end: int) -> None:
    conn = sqlite3.connect(path)
    conn.executemany(
        "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, prev_hash, hash)"
        " VALUES (?, ?, 'r', 'request', '2026-12-01 00:00:00', x'7b7d', 'p', ?)",
        _rows(start, end),
    )
    conn.commit()
    conn.close()


def _bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_count").fetchone()[0]) * int(
            conn.execute("PRAGMA page_size").fetchone()[0]
        )
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = args.events
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "audit.db"
        url = f"sqlite:///{path}"
        AuditStore.open(url).close()
        _append(path, 1, n)
        before = _bytes(path)
        with AuditStore.open(url) as store:
            state = MerkleState(store._backend)
            started = time.perf_counter()
            state.extend(n)
            build_s = time.perf_counter() - started
            after = _bytes(path)
            _append(path, n + 1, n + 1_000)
            started = time.perf_counter()
            state.extend(n + 1_000)
            extend_s = time.perf_counter() - started
            size = n + 1_000
            stored_s, streamed_s = [], []
            for round_ in range(args.rounds):
                index = (round_ * 7919 * 104729) % size
                path_ = inclusion_path(index, size)
                started = time.perf_counter()
                fast = tree_hashes(store, size, path_, roots_at=(size,))
                stored_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                slow = scan(log_leaves(store, size), size, path_, roots_at=(size,))
                streamed_s.append(time.perf_counter() - started)
                assert dict(fast.hashes) == dict(slow.hashes) and fast.roots == slow.roots
    stored, streamed = statistics.median(stored_s), statistics.median(streamed_s)
    result = {
        "events": n,
        "loadavg": os.getloadavg(),
        "first_build_s": round(build_s, 2),
        "first_build_events_per_s": round(n / build_s),
        "stored_tree_bytes_per_event": round((after - before) / n, 1),
        "extend_1000_events_ms": round(extend_s * 1000, 1),
        "proof_stored_ms_median": round(stored * 1000, 2),
        "proof_streamed_ms_median": round(streamed * 1000, 1),
        "streamed_over_stored": round(streamed / stored),
        "rounds": args.rounds,
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / f"merkle-{n}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
