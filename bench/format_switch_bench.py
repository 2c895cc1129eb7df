"""What the switch to log format 2 costs a store that was appending in format 1 when it came.

    python bench/format_switch_bench.py --threads 8 --before 4 --after 4 --rounds 3

Each round, on a fresh database of a throwaway PostgreSQL server: a store opened in format 1
appends from ``--threads`` threads (each append timed); after ``--before`` seconds another
store begins format 2; the first store's next append is refused by the chain guard, and it
follows (audit.store._log_format) while its threads go on for ``--after`` seconds. Reported per
round, as ratios within the round (the machine is shared): the slowest append around the
switch against the median format-1 append, and the format-2 median against the format-1
median; plus appends/s in each phase, and the checks that nothing was lost or recorded twice
(every seq once, count(*) == count(distinct event_id), every acknowledged seq present).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit import AuditStore, EventDraft, EventKind
from audit.store.migrate import upgrade
from audit.store.signing import Signer
from tests.support.postgres import running_postgres

SIGNER = Signer.from_text("b7" * 32)


def _round(url: str, threads: int, before_s: float, after_s: float) -> dict[str, object]:
    upgrade(url)
    timed: list[tuple[float, float]] = []  # (start, seconds) of each append
    acked: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    with AuditStore.open(url, "fsync", signer=SIGNER) as store:

        def appends(worker: int) -> None:
            n = 0
            while not stop.is_set():
                draft = EventDraft(
                    kind=EventKind.REQUEST,
                    request_id=f"w{worker}-{n}",
                    data={"n": n},
                    payloads={"body": f"body {worker} {n}".encode()},
                )
                start = time.perf_counter()
                try:
                    seq = store.append(draft).seq
                except Exception as exc:  # counted: the round reports it
                    with lock:
                        errors.append(type(exc).__name__)
                    return
                with lock:
                    timed.append((start, time.perf_counter() - start))
                    acked.append(seq)
                n += 1

        workers = [threading.Thread(target=appends, args=(w,)) for w in range(threads)]
        for w in workers:
            w.start()
        time.sleep(before_s)
        switch = time.perf_counter()
        AuditStore.open(url, log_format=2).close()
        switched = time.perf_counter()
        time.sleep(after_s)
        stop.set()
        for w in workers:
            w.join()
        era = store.sequenced_from
        with store._backend.reader.connect() as conn:
            rows, distinct, top = conn.exec_driver_sql(
                "SELECT count(*), count(DISTINCT event_id), max(seq) FROM events"
            ).one()
    f1 = [s for t, s in timed if t < switch - 0.2]
    near = [s for t, s in timed if switch - 0.2 <= t <= switched + 0.5]
    f2 = [s for t, s in timed if t > switched + 0.5]
    m1, m2 = statistics.median(f1), statistics.median(f2)
    return {
        "errors": errors,
        "era": era,
        "events": rows,
        "every_seq_once": rows == distinct == top == len(set(acked)) == len(acked),
        "f1_per_s": round(len(f1) / (switch - 0.2 - timed[0][0])),
        "f2_per_s": round(len(f2) / (after_s - 0.5)),
        "f1_median_ms": round(m1 * 1000, 2),
        "f2_median_ms": round(m2 * 1000, 2),
        "f2_vs_f1_median": round(m2 / m1, 2),
        "slowest_near_switch_ms": round(max(near) * 1000, 1) if near else None,
        "slowest_near_switch_vs_f1_median": round(max(near) / m1, 1) if near else None,
        "load": open("/proc/loadavg").read().split()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--before", type=float, default=4.0)
    parser.add_argument("--after", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with running_postgres() as server:
        for _ in range(args.rounds):
            url = server.url(server.create_database())
            print(json.dumps(_round(url, args.threads, args.before, args.after)), flush=True)


if __name__ == "__main__":
    main()
