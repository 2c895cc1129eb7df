"""Where a PostgreSQL purge spends its time: statements (nested ones too) and trigger functions.

    $ .venv/bin/python bench/purge_pg_profile.py --requests 100000

Builds purge_bench.py's log of N expired requests on a throw-away server started with
``pg_stat_statements`` (``track = all``: the statements inside triggers count on their own)
and ``track_functions = all``, runs one purge and its no-op rerun in a fresh process, then
prints the 25 statements with the most total time (calls, total ms, mean ms, rows, text),
the trigger functions by total time, and each table's scans. Then the plan PL/pgSQL keeps
for the ``erased_content`` guard (a generic plan, ``plan_cache_mode = force_generic_plan``)
as ``EXPLAIN (ANALYZE, BUFFERS)`` shows it for the last erasure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import psycopg  # noqa: E402  (after the path: the bench runs from a source tree)
from purge_bench import CHILD, RECORD_KEY, build  # noqa: E402

from audit.store.migrate import upgrade  # noqa: E402
from tests.support.postgres import running_postgres  # noqa: E402

STATEMENTS = """
SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3), rows,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 160)
FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25
"""
FUNCTIONS = """
SELECT funcname, calls, round(total_time::numeric, 1), round(self_time::numeric, 1)
FROM pg_stat_user_functions ORDER BY total_time DESC
"""
TABLES = """
SELECT relname, seq_scan, seq_tup_read, idx_scan, n_tup_ins, n_tup_del
FROM pg_stat_user_tables ORDER BY relname
"""
GUARD = "SELECT e.kind, e.body FROM events e WHERE e.seq = $1"  # 0016's lookup
GUARD_0014 = (
    "SELECT 1 FROM events e WHERE e.seq = $1 AND e.kind = 'erasure' "
    "AND position(convert_to($2, 'UTF8') IN e.body) > 0"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=10000)
    n = parser.parse_args().requests
    with running_postgres() as server:
        with (server.datadir / "postgresql.conf").open("a") as conf:
            conf.write(
                "\nshared_preload_libraries = 'pg_stat_statements'\n"
                "pg_stat_statements.track = all\ntrack_functions = all\n"
            )
        server.stop()
        server.start()
        time.sleep(2)
        db = server.create_database()
        url = server.url(db)
        upgrade(url)
        started = time.perf_counter()
        build(url, n)
        print(f"built {n} requests in {time.perf_counter() - started:.0f} s", flush=True)
        with psycopg.connect(server.dsn(db), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("VACUUM ANALYZE")  # statistics before any erasure, as in production
            conn.execute("SELECT pg_stat_statements_reset(), pg_stat_reset()")
        out = subprocess.run(
            [sys.executable, "-c", CHILD, url, RECORD_KEY],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        print(out.stdout.strip().splitlines()[-1])
        with psycopg.connect(server.dsn(db), autocommit=True) as conn:
            for title, query in (("statements", STATEMENTS), ("functions", FUNCTIONS)):
                print(f"\n{title}:")
                for row in conn.execute(query):
                    print("  ", row)
            print("\ntables:")
            for row in conn.execute(TABLES):
                print("  ", row)
            seq, digest = conn.execute(
                "SELECT erasure_seq, digest FROM erased_content ORDER BY erasure_seq DESC LIMIT 1"
            ).fetchone() or (0, "")
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute(f"PREPARE guard(int) AS {GUARD}")
            conn.execute(f"PREPARE guard_0014(int, text) AS {GUARD_0014}")
            for name, call in (
                ("0016", f"EXECUTE guard({seq})"),
                ("0014", f"EXECUTE guard_0014({seq}, '{digest}')"),
            ):
                print(f"\nthe guard's lookup as {name} writes it:")
                for (line,) in conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {call}"):
                    print("  ", line)


if __name__ == "__main__":
    main()
