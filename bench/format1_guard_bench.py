"""What migration 0010's chain guard costs a format-1 log: head guard vs 0007's, interleaved.

    $ .venv/bin/python bench/format1_guard_bench.py --rounds 20

0010 adds one call per inserted row to the chain guard of a format-1 log (is the log in
format 2 yet?). This measures it: two fresh databases at head on one throwaway server, one
with 0007's guard put back (bench-only, as the tables' owner), one process and one thread
appending ``append_many`` batches of 64 events to each in turn, ``--rounds`` times; it prints
the median time per event of each and their ratio. Timings on a shared machine are noisy:
read the ratio, not the figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import writers_bench as wb  # noqa: E402

from audit import AuditStore, EventKind  # noqa: E402
from audit.store.signing import Signer  # noqa: E402


def _guard_0007_sql() -> str:
    path = next((ROOT / "migrations" / "versions").glob("0007_*.py"))
    spec = importlib.util.spec_from_file_location("m0007", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module._guard("public", "PERFORM public.audit_chain_lock();", intact=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    import psycopg

    signer = Signer.from_text("77" * 32)
    with wb.postgres_server() as server:
        (head_url, _, _), (old_url, old_dsn, _) = (
            wb.fresh_postgres(server),
            wb.fresh_postgres(server),
        )
        with psycopg.connect(old_dsn, autocommit=True) as conn:
            conn.execute(_guard_0007_sql())
        times: dict[str, list[float]] = {"0010 guard": [], "0007 guard": []}
        stores = {
            "0010 guard": AuditStore.open(head_url, signer=signer),
            "0007 guard": AuditStore.open(old_url, signer=signer),
        }
        n = 0
        try:
            for rnd in range(args.rounds):
                order = list(stores.items()) if rnd % 2 == 0 else list(stores.items())[::-1]
                for label, store in order:
                    batch = []
                    for _ in range(args.batch // 2):
                        n += 1
                        batch += [wb.draft(label[:4], n, EventKind.REQUEST)]
                        batch += [wb.draft(label[:4], n, EventKind.RESPONSE)]
                    t0 = time.perf_counter()
                    store.append_many(batch)
                    times[label].append((time.perf_counter() - t0) / len(batch) * 1e6)
        finally:
            for store in stores.values():
                store.close()
    print(f"load {wb.load_triplet()}")
    med = {label: statistics.median(v) for label, v in times.items()}
    for label, value in med.items():
        print(f"{label}: {value:.1f} us per event (median of {args.rounds})")
    print(f"ratio 0010/0007: {med['0010 guard'] / med['0007 guard']:.3f}")


if __name__ == "__main__":
    main()
