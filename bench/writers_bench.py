"""Many writers on one chain: appends/s with several gateway processes, and where time goes.

    $ .venv/bin/python bench/writers_bench.py                       # PostgreSQL 1,3,6 x 8,16,32
    $ .venv/bin/python bench/writers_bench.py --procs 3 --threads 16 --seconds 5 --rounds 1
    $ .venv/bin/python bench/writers_bench.py --backend sqlite --procs 4 --threads 8
    $ .venv/bin/python bench/writers_bench.py --profile      # uncontended hold breakdown
    $ .venv/bin/python bench/writers_bench.py --table bench/out/writers-postgres-N.json

Each point starts P writer processes (``--child``), each of which opens its own
``AuditStore`` with its own record key, as a gateway process does, and runs T threads that
append REQUEST/RESPONSE pairs (a 512-byte payload each, like a request and an answer body)
through the public ``append`` for ``--seconds``. All processes start at the same instant
(after connecting and one warm-up pair each). PostgreSQL is a throwaway server started
here (tests/support/postgres.py); every point gets a fresh, migrated database.

Afterwards the log is checked: the seqs the writers were given are exactly 1..N, every
event is stored once (count, distinct event_id, max seq) and ``verify_log(store)`` passes with
every writer's public key trusted (links, lifecycle, signatures).

Where time goes (PostgreSQL): each writer times its own chain-lock transactions through
SQLAlchemy's public engine and pool events, without touching the store: lock wait (the
``SELECT audit_chain_lock()`` call), time held before COMMIT (head read, inserts, triggers,
signing), and COMMIT (WAL flush). The parent samples ``pg_stat_activity`` every 20 ms
(sessions waiting on a lock) and /proc/stat (CPU busy) over the measured window. Rounds
alternate the order of points so drift on the shared machine does not favour one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
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
from audit.store.signing import Signer, Trust, TrustedKeys  # noqa: E402
from audit.verify import verify_log  # noqa: E402

PAYLOAD = 512  # bytes per event body payload
WARM_UP_S = 1.0  # after the last process is ready, before the measured window


def load_triplet() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def draft(tag: str, n: int, kind: EventKind) -> EventDraft:
    body = f"{tag}:{n}:{kind.value}:".encode()
    return EventDraft(
        kind=kind,
        request_id=f"{tag}-{n}",
        task="compliance_review",
        caller="payments-svc",
        policy_fingerprint="sha256:" + "ab" * 32,
        request_hash=f"sha256:{n:064x}",
        data={"model": "claude-sonnet-4-6", "max_tokens": 1024, "ok": True, "n": n},
        payloads={"body": body + b"x" * (PAYLOAD - len(body))},
    )


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


# -- the writer process ---------------------------------------------------------------------


class LockProbe:
    """Times each chain-lock transaction of a PostgreSQL store from SQLAlchemy's engine and
    pool events (public hooks; the store's code is not changed): the lock statement's call
    is the wait, from its return to COMMIT the hold before commit, COMMIT to the connection's
    check-in the commit itself. The group leader runs the whole transaction in its thread."""

    def __init__(self, store: AuditStore) -> None:
        from sqlalchemy import event

        from audit.store.backend import CHAIN_LOCK_SQL

        engine = store._backend.writer  # bench-only: the engine the appender uses
        local = threading.local()
        self.samples: list[tuple[float, float, float, int]] = []  # wait, held, commit, events
        self.measuring = False

        def before(_c: Any, _cur: Any, sql: str, params: Any, _ctx: Any, many: bool) -> None:
            if sql == CHAIN_LOCK_SQL:
                local.t0 = time.perf_counter()
                local.n = 0
            elif sql.startswith("INSERT INTO events "):
                local.n = len(params) if many else 1  # one row goes as a plain execute

        def after(_c: Any, _cur: Any, sql: str, *_rest: Any) -> None:
            if sql == CHAIN_LOCK_SQL:
                local.t1 = time.perf_counter()

        def commit(_c: Any) -> None:
            local.t2 = time.perf_counter()

        def checkin(_dbapi: Any, _record: Any) -> None:
            t1 = getattr(local, "t1", None)
            if t1 is None:
                return
            now = time.perf_counter()
            if self.measuring:
                self.samples.append((t1 - local.t0, local.t2 - t1, now - local.t2, local.n))
            local.t1 = None

        event.listen(engine, "before_cursor_execute", before)
        event.listen(engine, "after_cursor_execute", after)
        event.listen(engine, "commit", commit)
        event.listen(engine, "checkin", checkin)


def child(args: argparse.Namespace) -> None:
    signer = Signer.from_text(args.key)
    tag = f"p{args.index}"
    seqs: list[int] = []
    latencies: list[float] = []
    lock = threading.Lock()
    with AuditStore.open(
        args.url, args.durability, signer=signer, log_format=args.log_format
    ) as store:
        # Format 2 takes no chain lock: nothing to probe.
        probe = (
            LockProbe(store)
            if store.sequenced_from is None and args.url.startswith("postgresql")
            else None
        )
        counter = iter(range(10**9))
        for kind in (EventKind.REQUEST, EventKind.RESPONSE):  # connect, warm the caches
            seqs.append(store.append(draft(tag, -1, kind)).seq)
        Path(args.ready).write_text("ready")
        while not Path(args.go).exists():
            time.sleep(0.005)
        start_at = float(Path(args.go).read_text())
        stop_at = start_at + args.seconds
        while time.time() < start_at - WARM_UP_S:
            time.sleep(0.001)

        def work() -> None:
            mine_seq: list[int] = []
            mine_lat: list[float] = []
            while (now := time.time()) < stop_at:
                n = next(counter)
                for kind in (EventKind.REQUEST, EventKind.RESPONSE):  # a pair is never split
                    t = time.perf_counter()
                    seq = store.append(draft(tag, n, kind)).seq
                    if now >= start_at:
                        mine_lat.append(time.perf_counter() - t)
                    mine_seq.append(seq)
            with lock:
                seqs.extend(mine_seq)
                latencies.extend(mine_lat)

        workers = [threading.Thread(target=work) for _ in range(args.threads)]
        for w in workers:
            w.start()
        while time.time() < start_at:
            time.sleep(0.001)
        if probe is not None:
            probe.measuring = True
        cpu0 = os.times()
        batches0 = store.group_commits
        while time.time() < stop_at:
            time.sleep(0.005)
        if probe is not None:
            probe.measuring = False
        cpu1 = os.times()
        batches = store.group_commits - batches0
        for w in workers:
            w.join()
    out = {
        "index": args.index,
        "public_key": signer.public_key,
        "seqs": seqs,
        "measured": len(latencies),
        "batches": batches,
        "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2),
        "latencies": [round(x * 1000, 3) for x in latencies],
        "lock": probe.samples if probe is not None else [],
    }
    Path(args.out).write_text(json.dumps(out))


# -- the parent -----------------------------------------------------------------------------


class ActivitySampler:
    """Every 20 ms: sessions of the database waiting on a lock, and active sessions."""

    def __init__(self, dsn: str | None, database: str | None) -> None:
        self._dsn, self._db = dsn, database
        self.lock_waiters: list[int] = []
        self.active: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self._dsn or "", autocommit=True) as conn:
            while not self._stop.wait(0.02):
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), "
                    "count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (self._db,),
                ).fetchone()
                assert row is not None
                self.lock_waiters.append(int(row[0]))
                self.active.append(int(row[1]))

    def __enter__(self) -> ActivitySampler:
        if self._dsn is not None:
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._dsn is not None:
            self._thread.join()


def spawn_writers(
    script: Path,
    url: str,
    durability: str,
    procs: int,
    threads: int,
    seconds: float,
    work: Path,
    extra: list[str] | None = None,
) -> Callable[[], list[dict[str, Any]]]:
    """Start ``procs`` writers of ``script --child``; returns a function that starts the
    measured window once all are ready and collects their reports."""
    go = work / "go"
    go.unlink(missing_ok=True)
    children = []
    for i in range(procs):
        key = f"{i + 1:02x}" * 32
        cmd = [
            sys.executable,
            str(script),
            "--child",
            "--url",
            url,
            "--durability",
            durability,
            "--threads",
            str(threads),
            "--seconds",
            str(seconds),
            "--index",
            str(i),
            "--key",
            key,
            "--ready",
            str(work / f"ready-{i}"),
            "--go",
            str(go),
            "--out",
            str(work / f"out-{i}.json"),
            *(extra or []),
        ]
        (work / f"ready-{i}").unlink(missing_ok=True)
        children.append(subprocess.Popen(cmd))

    def collect() -> list[dict[str, Any]]:
        deadline = time.time() + 120
        while not all((work / f"ready-{i}").exists() for i in range(procs)):
            if any(c.poll() not in (None, 0) for c in children) or time.time() > deadline:
                for c in children:
                    c.kill()
                raise RuntimeError("a writer failed to start")
            time.sleep(0.02)
        # Written whole, then renamed into place: a writer polling for it must never read
        # it half-written (an empty file failed a run).
        ready = go.with_name(go.name + ".tmp")
        ready.write_text(str(time.time() + WARM_UP_S + 0.1))
        ready.replace(go)
        for c in children:
            if c.wait(timeout=seconds + 180) != 0:
                raise RuntimeError(f"a writer exited with {c.returncode}")
        return [json.loads((work / f"out-{i}.json").read_text()) for i in range(procs)]

    return collect


def lock_summary(samples: list[list[float]], seconds: float) -> dict[str, Any]:
    if not samples:
        return {}
    waits = [s[0] * 1000 for s in samples]
    held = [(s[1] + s[2]) * 1000 for s in samples]
    commit = [s[2] * 1000 for s in samples]
    events = [int(s[3]) for s in samples]
    total_events = sum(events) or 1
    # Marginal hold per event: least squares of hold (ms) on batch size.
    fit = None
    if len(set(events)) > 1:
        slope, intercept = statistics.linear_regression(events, held)
        fit = {"fixed_ms": round(intercept, 3), "per_event_ms": round(slope, 4)}
    return {
        "transactions": len(samples),
        "mean_group": round(total_events / len(samples), 1),
        "wait_p50_ms": round(pct(waits, 0.5), 2),
        "held_p50_ms": round(pct(held, 0.5), 2),
        "held_p99_ms": round(pct(held, 0.99), 2),
        "commit_p50_ms": round(pct(commit, 0.5), 2),
        "held_per_event_ms": round(sum(held) / total_events, 3),
        # fraction of the window the chain lock was held by somebody (holds never overlap)
        "lock_busy": round(sum(held) / 1000 / seconds, 2),
        "fit": fit,
    }


def check_log(
    url: str, reports: list[dict[str, Any]], integrator_key: str | None = None
) -> dict[str, Any]:
    """Gap-free, every event once, verify passes with every writer's key trusted (and, for
    format 2, the integrator's: every event linked, none pending)."""
    given = sorted(s for r in reports for s in r["seqs"])
    n = len(given)
    if given != list(range(1, n + 1)):
        raise AssertionError("the writers' seqs are not exactly 1..N")
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            row = conn.execute(
                "SELECT count(*), count(DISTINCT event_id), max(seq) FROM events"
            ).fetchone()
    else:
        import psycopg

        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as pg:
            row = pg.execute(
                "SELECT count(*), count(DISTINCT event_id), max(seq) FROM events"
            ).fetchone()
    assert row is not None
    if tuple(row) != (n, n, n):
        raise AssertionError(f"stored (count, distinct ids, max seq) = {row}, expected {n}")
    keys = [r["public_key"] for r in reports]
    if integrator_key is not None:
        keys.append(Signer.from_text(integrator_key).public_key)
    trust = Trust(TrustedKeys.of(keys))
    start = time.perf_counter()
    with AuditStore.open(url, "os", create=False) as store:
        report = verify_log(store, trust=trust)
    if not report.ok or report.events_checked != n:
        raise AssertionError(f"verify failed: {report.defects[:3]}")
    if integrator_key is not None and (report.pending_integration or report.head_seq != n):
        raise AssertionError(f"not all linked: head {report.head_seq}, {n} events")
    return {"events": n, "verify_s": round(time.perf_counter() - start, 1), "ok": True}


def run_point(
    script: Path,
    url: str,
    durability: str,
    procs: int,
    threads: int,
    seconds: float,
    work: Path,
    dsn: str | None = None,
    database: str | None = None,
    extra: list[str] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One measured run; returns (figures, the writers' reports)."""
    load_before = load_triplet()
    collect = spawn_writers(script, url, durability, procs, threads, seconds, work, extra)
    sampler = ActivitySampler(dsn, database)
    with sampler:
        # CPU busy is taken over the whole run incl. start-up; the window dominates it
        busy0, total0 = cpu_ticks()
        reports = collect()
        busy1, total1 = cpu_ticks()
    latencies = [x for r in reports for x in r["latencies"]]
    measured = sum(r["measured"] for r in reports)
    figures: dict[str, Any] = {
        "procs": procs,
        "threads": threads,
        "events_per_s": round(measured / seconds),
        "p50_ms": round(pct(latencies, 0.5), 2),
        "p99_ms": round(pct(latencies, 0.99), 2),
        "mean_group": round(measured / max(1, sum(r["batches"] for r in reports)), 1),
        "writer_cpu_s": round(sum(r["cpu_s"] for r in reports), 1),
        "cpu_busy": round((busy1 - busy0) / max(1, total1 - total0), 2),
        "load_before": load_before,
        "load_after": load_triplet(),
    }
    if sampler.lock_waiters:
        figures["lock_waiters_mean"] = round(statistics.mean(sampler.lock_waiters), 1)
        figures["active_mean"] = round(statistics.mean(sampler.active), 1)
    lock = lock_summary([s for r in reports for s in r["lock"]], seconds)
    if lock:
        figures["lock"] = lock
    return figures, reports


@contextmanager
def postgres_server(max_connections: int = 200) -> Iterator[Any]:
    from tests.support.postgres import running_postgres

    with running_postgres() as server:
        if max_connections > 200:
            import psycopg

            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET max_connections = {max_connections}")
            server.stop()
            server.start()
        yield server


def fresh_postgres(server: Any) -> tuple[str, str, str]:
    """(url, dsn, database name) of a new, migrated database."""
    from audit.store.migrate import upgrade

    name = server.create_database()
    url = server.url(name)
    upgrade(url)
    return url, server.dsn(name), name


def fresh_sqlite(work: Path, n: int) -> str:
    url = f"sqlite:///{work / f'writers-{n}.db'}"
    AuditStore.open(url, "os").close()  # created and migrated once, before the writers
    return url


def _guard(url: str, *, on: bool) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute(
            f"ALTER TABLE events {'ENABLE' if on else 'DISABLE'} TRIGGER events_chain_guard"
        )


def profile_hold(urls: list[str], sizes: list[int], rounds: int) -> dict[str, Any]:
    """One process, one thread, no contention: the chain-lock hold of ``append_many`` batches
    of each size, with and without a record key (signing is done under the lock), without
    the chain guard trigger, and the cost of one Ed25519 signature alone. Each variant has
    its own scratch database (``urls``, three); sizes and variants are interleaved."""
    signer = Signer.from_text("77" * 32)
    sign_n = 5000
    start = time.perf_counter()
    for i in range(sign_n):
        signer.sign(f"sha256:{i:064x}")
    sign_us = (time.perf_counter() - start) / sign_n * 1e6
    out: dict[str, Any] = {"sign_us": round(sign_us, 1), "load": load_triplet()}
    labels = ("signed", "unsigned", "unsigned_no_guard")
    _guard(urls[2], on=False)  # bench-only, on a scratch database: what the trigger costs
    stores = [
        AuditStore.open(urls[0], "fsync", signer=signer),
        AuditStore.open(urls[1], "fsync"),
        AuditStore.open(urls[2], "fsync"),
    ]
    probes = [LockProbe(store) for store in stores]
    try:
        for store, probe in zip(stores, probes, strict=True):
            store.append_many([draft("warm", 0, EventKind.REQUEST)])
            probe.measuring = True
        n = 0
        for _ in range(rounds):
            for size in sizes:
                for label, store in zip(labels, stores, strict=True):
                    batch = []
                    for _ in range(size // 2 or 1):
                        n += 1
                        batch += [draft(label, n, EventKind.REQUEST)]
                        if size > 1:
                            batch += [draft(label, n, EventKind.RESPONSE)]
                    store.append_many(batch)
    finally:
        for store in stores:
            store.close()
    for label, probe in zip(labels, probes, strict=True):
        rows = {}
        for size in sizes:
            mine = [s for s in probe.samples if s[3] == size]
            rows[size] = {
                "held_p50_ms": round(pct([(s[1] + s[2]) * 1000 for s in mine], 0.5), 3),
                "commit_p50_ms": round(pct([s[2] * 1000 for s in mine], 0.5), 3),
            }
        xs = [s[3] for s in probe.samples]
        ys = [(s[1] + s[2]) * 1000 for s in probe.samples]
        slope, intercept = statistics.linear_regression(xs, ys)
        out[label] = {
            "by_size": rows,
            "fixed_ms": round(intercept, 3),
            "per_event_ms": round(slope, 4),
        }
    return out


def show(label: str, figures: dict[str, Any]) -> None:
    lock = figures.get("lock", {})
    print(
        f"{label:18} {figures['procs']}x{figures['threads']:<3} "
        f"{figures['events_per_s']:>6}/s p50 {figures['p50_ms']:>6} ms "
        f"p99 {figures['p99_ms']:>7} ms group {figures['mean_group']:>5} "
        f"cpu {figures['cpu_busy']:.2f} "
        + (
            f"lock busy {lock['lock_busy']:.2f} held/ev {lock['held_per_event_ms']} ms "
            f"held p50 {lock['held_p50_ms']} commit p50 {lock['commit_p50_ms']} "
            f"fit {lock['fit']} waiters {figures.get('lock_waiters_mean')} "
            if lock
            else ""
        )
        + f"load {figures['load_before']}",
        flush=True,
    )


def table(runs: list[dict[str, Any]], key: str = "durability") -> str:
    """A markdown table of runs grouped by (key, procs, threads): each round's events/s, then
    medians of the other figures over the rounds."""
    groups: dict[tuple[Any, int, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r.get(key), r["procs"], r["threads"]), []).append(r)
    lines = [
        f"| {key} | procs x threads | events/s (each round) | p50 / p99 ms | group | "
        "lock busy | held per event ms | held p50 / commit p50 ms | lock waiters | CPU busy | "
        "load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def med(rs: list[dict[str, Any]], *path: str) -> Any:
        values = []
        for r in rs:
            v: Any = r
            for p in path:
                v = v.get(p) if isinstance(v, dict) else None
            if v is not None:
                values.append(v)
        return round(statistics.median(values), 2) if values else "-"

    for (k, procs, threads), rs in sorted(groups.items(), key=lambda g: (str(g[0][0]), g[0][1:])):
        rates = ", ".join(f"{r['events_per_s']:,}" for r in rs)
        lines.append(
            f"| {k} | {procs} x {threads} | {rates} | {med(rs, 'p50_ms')} / {med(rs, 'p99_ms')} "
            f"| {med(rs, 'mean_group')} | {med(rs, 'lock', 'lock_busy')} "
            f"| {med(rs, 'lock', 'held_per_event_ms')} "
            f"| {med(rs, 'lock', 'held_p50_ms')} / {med(rs, 'lock', 'commit_p50_ms')} "
            f"| {med(rs, 'lock_waiters_mean')} | {med(rs, 'cpu_busy')} "
            f"| {', '.join(str(r['load_before'][0]) for r in rs)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--procs", default="1,3,6")
    parser.add_argument("--threads", default="8,16,32")
    parser.add_argument("--durability", default="fsync", help="fsync, os, or both: fsync,os")
    parser.add_argument(
        "--format", default="1", help="audit log format: 1, 2 (PostgreSQL), or both: 1,2"
    )
    parser.add_argument(
        "--integrate-after",
        action="store_true",
        help="format 2: integrate the backlog after the window (its capacity), not during",
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--profile", action="store_true", help="only the uncontended lock-hold breakdown"
    )
    parser.add_argument("--table", metavar="JSON", help="print a results file as markdown")
    # child-only
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("url", "key", "ready", "go", "out"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--log-format", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.threads = int(args.threads)
        child(args)
        return
    if args.table:
        data = json.loads(Path(args.table).read_text())
        first = data["runs"][0]
        key = next((k for k in ("mode", "format") if k in first), "durability")
        print(table(data["runs"], key))
        return

    points = [(int(p), int(t)) for p in args.procs.split(",") for t in args.threads.split(",")]
    durabilities = args.durability.split(",")
    formats = [int(f) for f in args.format.split(",")]
    work = Path(tempfile.mkdtemp(prefix="writers-bench-"))
    results: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
        "backend": args.backend,
        "seconds": args.seconds,
        "runs": [],
    }
    script = Path(__file__).resolve()
    print(f"machine: {results['machine']}; load {load_triplet()}", flush=True)
    if args.profile:
        with postgres_server() as server:
            urls = [fresh_postgres(server)[0] for _ in range(3)]
            figures = profile_hold(urls, [1, 4, 16, 64, 256], 10 * args.rounds)
        print(json.dumps(figures))
        return
    try:
        with contextmanager_for(args.backend)() as server:
            n = 0
            for rnd in range(args.rounds):
                order = points if rnd % 2 == 0 else points[::-1]
                for durability in durabilities if rnd % 2 == 0 else durabilities[::-1]:
                    for procs, threads in order:
                        for fmt in formats if (rnd + procs) % 2 == 0 else formats[::-1]:
                            n += 1
                            if server is None:
                                url, dsn, db = fresh_sqlite(work, n), None, None
                            else:
                                url, dsn, db = fresh_postgres(server)
                            figures, reports, integrator = run_format(
                                fmt, script, url, durability, procs, threads, args, work, dsn, db
                            )
                            figures["check"] = check_log(url, reports, integrator)
                            figures["durability"] = durability
                            figures["format"] = fmt
                            figures["round"] = rnd
                            results["runs"].append(figures)
                            show(f"{args.backend}-{durability} f{fmt} r{rnd}", figures)
    finally:
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    target = out / f"writers-{args.backend}-{int(time.time())}.json"
    target.write_text(json.dumps(results, indent=2))
    print(f"written {target.relative_to(ROOT)}")
    print(table(results["runs"], "format" if len(formats) > 1 else "durability"))


INTEGRATOR_KEY = "5e" * 32


def run_format(
    fmt: int,
    script: Path,
    url: str,
    durability: str,
    procs: int,
    threads: int,
    args: argparse.Namespace,
    work: Path,
    dsn: str | None,
    db: str | None,
) -> tuple[dict[str, Any], list[dict[str, Any]], str | None]:
    """One point in format ``fmt``. Format 2: the log begins format 2, and one
    `gateway audit integrate` process runs beside the writers (as in production); after the
    window it is stopped (SIGTERM: it finishes its pass and checkpoints) and a last
    ``--once`` pass links what is left, so the check can require every event linked."""
    if fmt == 1:
        figures, reports = run_point(
            script, url, durability, procs, threads, args.seconds, work, dsn, db
        )
        return figures, reports, None
    import signal

    AuditStore.open(url, durability, log_format=2).close()
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_AUDIT_FORMAT": "2",
        "GATEWAY_DURABILITY": durability,
        "GATEWAY_INTEGRATOR_KEY": INTEGRATOR_KEY,
    }
    gateway = str(Path(sys.executable).with_name("gateway"))
    cmd = [gateway, "audit", "integrate", "--format", "json", "--interval", "0.25"]
    # --integrate-after: no integrator during the window; the backlog is linked after it,
    # timed: the integrator's capacity when it has the machine to itself.
    integrator = None
    if not args.integrate_after:
        integrator = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        figures, reports = run_point(
            script, url, durability, procs, threads, args.seconds, work, dsn, db,
            ["--log-format", "2"],
        )  # fmt: skip
    finally:
        out = '{"linked": 0, "voided": 0}'
        if integrator is not None:
            integrator.send_signal(signal.SIGTERM)
            out, _ = integrator.communicate(timeout=300)
    start = time.perf_counter()
    last = subprocess.run([*cmd, "--once"], env=env, capture_output=True, text=True, check=True)
    drain_s = time.perf_counter() - start
    during, after = json.loads(out), json.loads(last.stdout)
    figures["integration"] = {
        "linked_during": during["linked"],
        "linked_after": after["linked"],
        "after_s": round(drain_s, 2),  # the --once run, process start-up included
        "after_per_s": round(after["linked"] / drain_s),
        "voided": during["voided"] + after["voided"],
    }
    return figures, reports, INTEGRATOR_KEY


def contextmanager_for(backend: str) -> Callable[[], Any]:
    if backend == "postgres":
        return postgres_server

    @contextmanager
    def nothing() -> Iterator[None]:
        yield None

    return nothing


if __name__ == "__main__":
    main()
