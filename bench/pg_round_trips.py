"""Count the round trips and statements of one PostgreSQL append.

    $ .venv/bin/python bench/pg_round_trips.py [--appends 20]

A throwaway server (tests/support/postgres.py) with ``log_statement = 'all'`` for the
database; a store appends one warm-up event (its first append asks what role it has), then
``--appends`` REQUEST events with a payload each, one at a time; the statements the server
logged for them are counted and listed, and the round trips (libpq's protocol trace of the
store's connections: each run of messages from the client after the server's answer is one)
are counted.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from sqlalchemy import event  # noqa: E402

from audit import AuditStore, EventDraft, EventKind  # noqa: E402
from audit.store.migrate import upgrade  # noqa: E402
from audit.store.signing import Signer  # noqa: E402
from tests.support.postgres import running_postgres  # noqa: E402

STATEMENT = re.compile(r"LOG:\s+(?:statement|execute [^:]*):\s+(.*)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=20)
    args = parser.parse_args()
    with running_postgres() as server:
        db = server.create_database()
        url = server.url(db)
        upgrade(url)
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE \"{db}\" SET log_statement = 'all'")
        log = server.datadir / "server.log"
        signer = Signer.generate()
        trace_path = Path(tempfile.mkdtemp(prefix="pg-trace-")) / "trace.txt"
        trace = trace_path.open("w")
        with AuditStore.open(url, signer=signer) as store:
            store.append(EventDraft(kind=EventKind.REQUEST, request_id="warm", data={"n": -1}))
            store._backend.writer.pool.dispose()  # the next append's connection is traced

            @event.listens_for(store._backend.writer, "connect")
            def _traced(dbapi_conn: psycopg.Connection, _record: object) -> None:
                dbapi_conn.pgconn.trace(trace.fileno())

            store.append(EventDraft(kind=EventKind.REQUEST, request_id="warm2", data={"n": -2}))
            trace.flush()
            trace_start = trace.tell()
            start = log.stat().st_size
            for n in range(args.appends):
                store.append(
                    EventDraft(
                        kind=EventKind.REQUEST,
                        request_id=f"r{n}",
                        data={"n": n},
                        payloads={"request": f"body {n}".encode()},
                    )
                )
            trace.flush()
            trace_end = trace.tell()
            end = log.stat().st_size
        with log.open("rb") as f:
            f.seek(start)
            lines = f.read(end - start).decode(errors="replace").splitlines()
        trace.flush()
        directions = [
            line.split("\t")[1]
            for line in trace_path.read_text()[trace_start:trace_end].splitlines()
            if line.count("\t") >= 2
        ]
    trips = sum(
        1 for i, d in enumerate(directions) if d == "F" and (i == 0 or directions[i - 1] == "B")
    )
    print(f"{trips / args.appends:.1f} round trips per append (libpq trace)")
    found = [m.group(1)[:70] for line in lines if (m := STATEMENT.search(line))]
    counts = collections.Counter(found)
    print(f"{len(found) / args.appends:.1f} statements per append")
    for sql, n in counts.most_common():
        print(f"  {n / args.appends:4.1f}  {sql}")


if __name__ == "__main__":
    main()
