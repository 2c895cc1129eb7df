"""Verify at scale, before and after, SQLite and PostgreSQL: full, since a verified checkpoint,
and links only (no signature checks), interleaved in one run.

    $ .venv/bin/python bench/verify_bench.py --events 1000000 --tail 100000 \\
          --before /tmp/before --work /tmp/verify-bench --rounds 2

``--before DIR`` is a tree holding the old code's ``audit/`` and ``migrations/`` (``git archive
COMMIT audit migrations | tar -x -C DIR``); ``--after DIR`` the new code's (default: this
checkout, which then must not change during the run). The log is `bench/audit_bench.py`'s ``draft(n,
payload=True)`` (alternating REQUEST/RESPONSE, a 512-byte payload each), signed by one record
key, made once on SQLite (kept in ``--work`` for the next run) and copied row for row into a
throwaway PostgreSQL server (its chain guard checks every row on the way in).

The verified checkpoint covers the first ``events - tail`` events: the log as it was before
its last ``tail`` events (a copy with the tail cut off, the same store and rows) is verified
in full and the result signed; "since" then verifies the whole log against it. Each
measurement runs in a fresh process (peak RSS is that process's, and its signature workers'
separately); CPU is the verifying process's own. Results print as a table and as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

RECORD_SEED = "11" * 32
CHECKPOINT_KEY = "22" * 32

# Runs in a fresh interpreter with the code under test first on sys.path: one verify.
CHILD = r"""
import gc, json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
if os.environ.get("VERIFY_BENCH_GC_OFF"):
    gc.disable()  # as `gateway audit verify` runs it
from audit import AuditStore
from audit.store.signing import Signer, Trust, TrustedKeys
try:
    from audit.verify import verify_log
except ImportError:  # a tree from before audit.verify, whose store verified itself
    def verify_log(store, *args, **kwargs):
        return store.verify(*args, **kwargs)
url, mode = sys.argv[2], sys.argv[3]
jobs = int(os.environ.get("VERIFY_BENCH_JOBS", "0"))
trust = Trust(TrustedKeys.of([Signer.from_text(sys.argv[4]).public_key]))
kwargs = {}
if mode == "links":
    trust = None
elif mode == "since":
    from audit.proofs import checkpoint as checkpoints
    with open(sys.argv[5], encoding="utf-8") as f:
        cp = checkpoints.loads(f.read())
    kwargs["relied"] = checkpoints.relied_on(cp, trust.keys, {cp.public_key})
elif mode == "write":
    kwargs["measure_head"] = True
if jobs:
    kwargs["jobs"] = jobs  # the code before --jobs has no such parameter: not passed to it
with AuditStore.open(url, "os") as store:
    start, cpu = time.perf_counter(), time.process_time()
    report = verify_log(store, trust=trust, **kwargs)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert report.ok, report.defects[:3]
    if mode == "write":
        from audit.proofs import checkpoint as checkpoints
        try:
            from audit.proofs import verified_checkpoint
        except ImportError:  # a tree from before audit.proofs
            verified_checkpoint = type(store).verified_checkpoint
        made = verified_checkpoint(store, report, bytes.fromhex(sys.argv[6]))
        with open(sys.argv[5], "w", encoding="utf-8") as f:
            f.write(checkpoints.dumps(made))
mb = lambda who: resource.getrusage(who).ru_maxrss / 1024
print(json.dumps({
    "events": report.events_checked, "seconds": round(wall, 2),
    "events_per_s": round(report.events_checked / wall),
    "cpu_us_per_event": round(cpu / report.events_checked * 1e6, 2),
    "peak_rss_mb": round(mb(resource.RUSAGE_SELF), 1),
    "workers_peak_rss_mb": round(mb(resource.RUSAGE_CHILDREN), 1),
    "workers_cpu_us_per_event": round(
        (lambda u: u.ru_utime + u.ru_stime)(resource.getrusage(resource.RUSAGE_CHILDREN))
        / report.events_checked * 1e6, 2),
    "signatures_from": getattr(report, "signatures_checked_from", None),
    "load": open("/proc/loadavg").read().split()[0],
}))
"""


# The signature bound: one process verifying Ed25519 signatures with `cryptography`, as many
# as a log of N events holds (one per event), over 32-byte-hash-sized messages.
BOUND = r"""
import json, os, time
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
key = Ed25519PrivateKey.generate()
public = key.public_key()
messages = [os.urandom(71) for _ in range(2000)]
signed = [(m, key.sign(m)) for m in messages]
n, start, cpu = 0, time.perf_counter(), time.process_time()
while n < 20000:
    for m, s in signed:
        public.verify(s, m)
    n += len(signed)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"events": n, "seconds": round(wall, 2), "events_per_s": round(n / wall),
    "cpu_us_per_event": round(cpu / n * 1e6, 2), "per_cpu_s": round(n / cpu),
    "peak_rss_mb": 0, "workers_peak_rss_mb": 0, "workers_cpu_us_per_event": 0,
    "load": open("/proc/loadavg").read().split()[0]}))
"""


def bound() -> dict[str, Any]:
    """Ed25519 verifies a second on one core, in a fresh process (the rate per core in use)."""
    out = subprocess.run(
        [sys.executable, "-c", BOUND], check=True, capture_output=True, text=True, cwd="/"
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(
    code: Path, url: str, mode: str, verified: Path, *, gc_off: bool = False, jobs: int = 0
) -> dict[str, Any]:
    argv = [sys.executable, "-c", CHILD, str(code), url, mode, RECORD_SEED, str(verified)]
    if mode == "write":
        argv.append(CHECKPOINT_KEY)
    env = {**os.environ, "VERIFY_BENCH_JOBS": str(jobs)}
    if gc_off:
        env["VERIFY_BENCH_GC_OFF"] = "1"
    # The child imports the code under test only: not this checkout's through the cwd.
    out = subprocess.run(argv, check=False, capture_output=True, text=True, cwd="/", env=env)
    if out.returncode != 0:
        raise SystemExit(f"{mode} with {code} failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def make_sqlite_log(path: Path, events: int) -> None:
    from audit_bench import draft

    from audit import AuditStore
    from audit.store.signing import Signer

    start = time.perf_counter()
    with AuditStore.open(f"sqlite:///{path}", "os", signer=Signer.from_text(RECORD_SEED)) as s:
        for first in range(0, events, 2000):
            s.append_many([draft(n, payload=True) for n in range(first, min(first + 2000, events))])
    print(f"  generated {events} events in {time.perf_counter() - start:.0f} s", flush=True)


def cut_tail(source: Path, target: Path, keep: int) -> None:
    """The same log as it was at seq ``keep``: a copy, its later events removed."""
    shutil.copy(source, target)
    with sqlite3.connect(target, isolation_level=None) as conn:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DELETE FROM events WHERE seq > ?", (keep,))
        conn.execute("DELETE FROM merkle_nodes")
        conn.execute("VACUUM")


COLUMNS = (
    "seq, event_id, request_id, kind, recorded_at, task, caller, policy_fingerprint, "
    "request_hash, body, prev_hash, hash, signature, key_id"
)


def copy_to_postgres(sqlite_path: Path, url: str, first: int, last: int) -> None:
    """Events ``first..last`` (and their payloads) row for row, as the SQLite log holds them."""
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    src = sqlite3.connect(sqlite_path)
    start = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        conn.execute("SET TIME ZONE 'UTC'")  # SQLite's recorded_at is UTC text
        for low in range(first, last + 1, 50_000):
            high = min(low + 49_999, last)
            rows = src.execute(
                f"SELECT {COLUMNS} FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq",
                (low, high),
            ).fetchall()
            digests = [d for r in rows for d in json.loads(r[9])["payloads"].values()]
            with conn.cursor() as cur:
                with cur.copy("COPY payloads (digest, size, content) FROM STDIN") as copy:
                    for start_at in range(0, len(digests), 900):
                        chunk = digests[start_at : start_at + 900]
                        marks = ",".join("?" * len(chunk))
                        for row in src.execute(
                            f"SELECT digest, size, content FROM payloads WHERE digest IN ({marks})",
                            chunk,
                        ):
                            copy.write_row(row)
                with cur.copy(f"COPY events ({COLUMNS}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            conn.commit()
    print(f"  copied seq {first}..{last} to PostgreSQL in {time.perf_counter() - start:.0f} s")


def run(
    label: str,
    url: str,
    args: argparse.Namespace,
    verified: Path,
    results: list[dict[str, Any]],
    before_url: str | None = None,
) -> None:
    """``before_url``: the log as the old code's schema has it, when that differs."""
    # (name, tree, jobs): the old code walks in one process; the new one with each --jobs.
    codes: list[tuple[str, Path, int]] = [("before", args.before, 0)] if args.before else []
    for jobs in (int(j) for j in args.jobs.split(",")):
        codes.append((f"after-j{jobs}" if jobs else "after", args.after, jobs))
    if args.cli:
        codes.append(("after-cli", args.after, 0))  # the command's way: no cyclic collector
    for round_no in range(1, args.rounds + 1):
        if args.bound:
            row = {"backend": label, "code": "ed25519", "mode": "bound", "round": round_no}
            row.update(bound())
            results.append(row)
            print("  " + json.dumps(row), flush=True)
        for mode in args.modes.split(","):
            for code_name, code, jobs in codes:
                if mode == "since" and code_name == "before" and not args.before_since:
                    continue  # code before verified checkpoints has none
                gc_off = code_name == "after-cli"
                at = before_url if code_name == "before" and before_url else url
                figures = measure(Path(code), at, mode, verified, gc_off=gc_off, jobs=jobs)
                row = {"backend": label, "code": code_name, "mode": mode, "round": round_no}
                row.update(figures)
                results.append(row)
                print("  " + json.dumps(row), flush=True)


def migrate(code: Path, url: str) -> None:
    """Migrated by the new code's tree, not this checkout's (which may be further on)."""
    subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "from audit.store.migrate import upgrade; upgrade(sys.argv[2])", str(code), url],
        check=True, cwd="/",
    )  # fmt: skip


def head_of(code: Path) -> str:
    """The schema revision a code tree's migrations end at."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "from audit.store.migrate import head_revision; print(head_revision())", str(code)],
        check=True, cwd="/", capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--tail", type=int, default=100_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/verify-bench"))
    parser.add_argument("--before", type=Path, help="the old code's tree (audit/, migrations/)")
    parser.add_argument("--after", type=Path, default=ROOT, help="the new code's (default: here)")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="links,full,since")
    parser.add_argument("--cli", action="store_true", help="also the new code with gc off")
    parser.add_argument(
        "--jobs", default="0", help="the new code's verify(jobs=...) values, e.g. 1,2 (0: default)"
    )
    parser.add_argument(
        "--bound", action="store_true", help="each round, also one core's Ed25519 verify rate"
    )
    parser.add_argument(
        "--before-since", action="store_true", help="the old code has verified checkpoints too"
    )
    args = parser.parse_args()

    args.work.mkdir(parents=True, exist_ok=True)
    log = args.work / f"log-{args.events}.db"
    if not log.exists():
        make_sqlite_log(log, args.events)
    # The old code refuses a schema newer than its own: it gets a copy of the log made before
    # the new code migrates it (kept in --work too).
    split = args.before is not None and head_of(args.before) != head_of(args.after)
    before_log = args.work / f"log-{args.events}-{head_of(args.before)}.db" if split else None
    if before_log is not None and not before_log.exists():
        shutil.copy(log, before_log)
        migrate(args.before, f"sqlite:///{before_log}")
    migrate(args.after, f"sqlite:///{log}")
    keep = args.events - args.tail
    results: list[dict[str, Any]] = []
    print(f"load average at start: {Path('/proc/loadavg').read_text().strip()}")
    if "sqlite" in args.backends:
        earlier = args.work / f"log-{args.events}-upto-{keep}.db"
        verified = args.work / f"verified-sqlite-{keep}.json"
        if not verified.exists() and "since" in args.modes:  # only "since" reads it
            cut_tail(log, earlier, keep)
            made = measure(args.after, f"sqlite:///{earlier}", "write", verified)
            print(f"  verified checkpoint at seq {keep}: {json.dumps(made)}", flush=True)
            results.append({"backend": "sqlite", "code": "after", "mode": "write", **made})
            earlier.unlink()
        before_url = f"sqlite:///{before_log}" if before_log is not None else None
        run("sqlite", f"sqlite:///{log}", args, verified, results, before_url)
    if "postgres" in args.backends:
        from tests.support.postgres import running_postgres

        with running_postgres() as server:
            url = server.url(server.create_database())
            migrate(args.after, url)
            before_url = None
            if split:
                before_url = server.url(server.create_database())
                migrate(args.before, before_url)
                copy_to_postgres(log, before_url, 1, args.events)
            verified = args.work / f"verified-postgres-{keep}.json"
            if "since" in args.modes:  # a verified checkpoint of the log cut at keep
                copy_to_postgres(log, url, 1, keep)
                made = measure(args.after, url, "write", verified)
                print(f"  verified checkpoint at seq {keep}: {json.dumps(made)}", flush=True)
                results.append({"backend": "postgres", "code": "after", "mode": "write", **made})
                copy_to_postgres(log, url, keep + 1, args.events)
            else:
                copy_to_postgres(log, url, 1, args.events)
            run("postgres", url, args, verified, results, before_url)
    print(f"load average at end: {Path('/proc/loadavg').read_text().strip()}")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / f"verify_bench-{int(time.time())}.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"{'backend':9} {'code':8} {'mode':6} {'events/s':>9} {'CPU us/ev':>9} "
        f"{'workers':>8} {'RSS MB':>7} {'workers':>7} load"
    )
    for r in results:
        print(
            f"{r['backend']:9} {r['code']:8} {r['mode']:6} {r['events_per_s']:>9} "
            f"{r['cpu_us_per_event']:>9} {r.get('workers_cpu_us_per_event', '-'):>8} "
            f"{r['peak_rss_mb']:>7} {r['workers_peak_rss_mb']:>7} {r['load']}"
        )


if __name__ == "__main__":
    main()
