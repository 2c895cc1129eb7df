"""Audit store benchmark: append throughput, verify/export throughput, memory, bytes per event.

    $ .venv/bin/python bench/audit_bench.py                      # defaults: 100k-event log
    $ .venv/bin/python bench/audit_bench.py --events 1000000     # the full-size run
    $ .venv/bin/python bench/audit_bench.py --skip-append --events 20000 --backends sqlite-os

Appends: N threads in one process append single events through the public ``append`` (group
commit), for SQLite fsync, SQLite os and PostgreSQL (a throwaway server, started here).
Log-size figures: the log is filled in 1,000-event transactions (``append_many``, the same
hashing path), then verify and export each run in a fresh subprocess whose peak RSS is
reported at a quarter of the log and at the whole log: flat memory means the two agree.
Results print as a table and are written as JSON under bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from audit import AuditStore, EventDraft, EventKind  # noqa: E402
from audit.store.migrate import upgrade  # noqa: E402
from audit.verify import verify_log  # noqa: E402

PAYLOAD = 512  # bytes of request body per event in the big log (a short prompt)


def fsync_latency_ms(folder: Path, rounds: int = 200) -> dict[str, float]:
    path = folder / "fsync.probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    samples = []
    try:
        for _ in range(rounds):
            os.write(fd, b"x" * 512)
            start = time.perf_counter()
            os.fsync(fd)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    samples.sort()
    return {"p50": samples[len(samples) // 2], "p99": samples[int(len(samples) * 0.99)]}


def draft(n: int, payload: bool = False) -> EventDraft:
    body = {"request_body": (f"{n:08d}" * (PAYLOAD // 8)).encode()} if payload else {}
    return EventDraft(
        kind=EventKind.REQUEST if n % 2 == 0 else EventKind.RESPONSE,
        request_id=f"req-{n // 2}",
        task="compliance_review",
        caller="payments-svc",
        policy_fingerprint="sha256:" + "ab" * 32,
        request_hash=f"sha256:{n // 2:064x}",
        data={"model": "claude-sonnet-4-6", "max_tokens": 1024, "ok": True, "n": n},
        payloads=body,
    )


def bench_appends(url: str, durability: str, threads: int, total: int) -> dict[str, Any]:
    per_thread = max(1, total // threads)
    latencies: list[float] = []
    lock = threading.Lock()
    with AuditStore.open(url, durability) as store:
        batches_before = store.group_commits

        def work(t: int) -> None:
            mine = []
            for n in range(per_thread):
                start = time.perf_counter()
                store.append(draft(t * per_thread + n))
                mine.append(time.perf_counter() - start)
            with lock:
                latencies.extend(mine)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        start = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - start
        batches = store.group_commits - batches_before
    latencies.sort()
    count = per_thread * threads
    return {
        "threads": threads,
        "appends": count,
        "events_per_s": round(count / elapsed),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
        "mean_group": round(count / max(batches, 1), 1),
    }


def fill(url: str, upto: int, have: int) -> float:
    start = time.perf_counter()
    with AuditStore.open(url, "os") as store:
        for first in range(have, upto, 1000):
            store.append_many(
                [draft(n, payload=True) for n in range(first, min(first + 1000, upto))]
            )
    return time.perf_counter() - start


def measure_read(url: str, what: str) -> dict[str, Any]:
    """Verify or export in a fresh process, so its peak RSS is the read's own."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, "--url", url],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def child(what: str, url: str) -> None:
    from audit import export_events

    with AuditStore.open(url, "os") as store:
        start = time.perf_counter()
        if what == "verify":
            report = verify_log(store)
            assert report.ok, report.defects[:3]
            events, size = report.events_checked, report.bytes_checked
        else:
            with open(os.devnull, "w", encoding="utf-8") as sink:
                summary = export_events(store, sink, "jsonl")
            events, size = summary.events, summary.bytes
        elapsed = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "what": what,
                "events": events,
                "seconds": round(elapsed, 2),
                "events_per_s": round(events / elapsed),
                "mb_per_s": round(size / elapsed / 1e6, 1),
                "peak_rss_mb": round(rss_mb, 1),
            }
        )
    )


def bytes_per_event(url: str, events: int) -> float:
    if url.startswith("sqlite"):
        db = Path(url.removeprefix("sqlite:///"))
        import sqlite3

        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return db.stat().st_size / events
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT pg_total_relation_size('events') + pg_total_relation_size('payloads')"
        ).fetchone()
    assert row is not None
    return float(row[0]) / events


@contextmanager
def postgres() -> Iterator[Callable[[], str]]:
    """A throwaway server; yields a function that makes a fresh, migrated database."""
    from tests.support.postgres import running_postgres

    with running_postgres() as server:

        def fresh() -> str:
            url = server.url(server.create_database())
            upgrade(url)
            return url

        yield fresh


def log_figures(url: str, events: int) -> dict[str, Any]:
    quarter = max(events // 4, 1)
    figures: dict[str, Any] = {"events": events}

    def step(name: str, value: Any) -> None:
        figures[name] = value
        print(f"    {name}: {json.dumps(value)}", flush=True)

    step("fill_s_quarter", round(fill(url, quarter, 0), 1))
    step("verify_quarter", measure_read(url, "verify"))
    step("export_quarter", measure_read(url, "export"))
    # the quarter's export appended one EXPORT event (reads are recorded)
    step("fill_s_rest", round(fill(url, events, quarter + 1), 1))
    step("verify_full", measure_read(url, "verify"))
    step("export_full", measure_read(url, "export"))
    step("bytes_per_event", round(bytes_per_event(url, events)))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="size of the big log")
    parser.add_argument("--appends", type=int, default=2000, help="appends per concurrency")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--backends", default="sqlite-fsync,sqlite-os,postgres")
    parser.add_argument("--skip-append", action="store_true")
    parser.add_argument("--skip-log", action="store_true")
    parser.add_argument("--child", choices=["verify", "export"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.url)
        return

    backends = args.backends.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]
    work = Path(tempfile.mkdtemp(prefix="audit-bench-", dir=ROOT / "bench"))
    results: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
        "python": platform.python_version(),
        "fsync_ms": fsync_latency_ms(work),
        "appends": {},
        "log": {},
    }
    print(f"machine: {results['machine']}; fsync {results['fsync_ms']}")
    try:
        for backend in backends:
            if backend == "postgres":
                with postgres() as fresh:
                    run_backend(args, results, backend, fresh, levels, "fsync")
            else:
                durability = backend.split("-")[1]
                run_backend(args, results, backend, _files(work, backend), levels, durability)
    finally:
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    size = "appends" if args.skip_log else str(args.events)
    target = out / f"audit-{size}-{'-'.join(backends)}.json"
    target.write_text(json.dumps(results, indent=2))
    print(f"written {target.relative_to(ROOT)}")


def _files(work: Path, backend: str) -> Callable[[], str]:
    names = iter(range(1_000))
    return lambda: f"sqlite:///{work / backend}-{next(names)}.db"


def run_backend(
    args: argparse.Namespace,
    results: dict[str, Any],
    backend: str,
    fresh: Callable[[], str],
    levels: list[int],
    durability: str,
) -> None:
    if not args.skip_append:
        rows = []
        for threads in levels:
            row = bench_appends(fresh(), durability, threads, args.appends)
            rows.append(row)
            print(f"append {backend:13} {json.dumps(row)}", flush=True)
        results["appends"][backend] = rows
    # The big log once per backend: its read speed does not depend on the write durability.
    if not args.skip_log and backend != "sqlite-fsync":
        figures = log_figures(fresh(), args.events)
        results["log"][backend] = figures
        print(f"log    {backend:13} {json.dumps(figures)}", flush=True)


if __name__ == "__main__":
    main()
