"""Purge of N expired requests, SQLite and PostgreSQL: requests per second and peak memory.

    $ .venv/bin/python bench/purge_bench.py --requests 10000,100000 --backends sqlite,postgres

Each request is a REQUEST and a RESPONSE (a unique ~300-byte request body and answer each),
recorded under compliance_review with ``[retention] content_days = 1`` and signed by one
record key; every fourth request repeats an earlier request body, so the purge also decides
shared content. The log is built with ``append_many``, then one ``purge`` (as
`gateway audit purge` runs it, two days later) runs in a fresh process: its wall time, the
requests erased per second and its peak RSS (``ru_maxrss``, the process's whole footprint:
flat in N means the purge holds pages, not the log). A second purge then measures the no-op
pass a scheduler pays each time. Results print as a table and as JSON.

``--baseline DIR`` (an older tree: ``git archive main | tar -x -C /tmp/base``) runs that tree's
own bench for each size and backend right after this tree's, interleaved, and prints the
ratio of requests per second with the machine's load (``/proc/loadavg``) beside each round.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

RECORD_KEY = "11" * 32

CHILD = r"""
import json, resource, sys, time
from datetime import UTC, datetime, timedelta
from gateway import Settings
from gateway.evidence import Erasing
url, key = sys.argv[1], sys.argv[2]
later = datetime.now(UTC) + timedelta(days=2)
with Erasing.open(Settings(database_url=url, record_key=key)) as erasing:
    start = time.perf_counter()
    first = erasing.purge(actor="bench", now=later)
    mid = time.perf_counter()
    again = erasing.purge(actor="bench", now=later)
    end = time.perf_counter()
print(json.dumps({
    "erased": first.requests_erased, "removed": first.payloads_removed,
    "kept": first.payloads_kept, "seconds": mid - start, "again_seconds": end - mid,
    "again_erased": again.requests_erased,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def build(url: str, n: int) -> None:
    from audit import AuditStore, EventDraft, EventKind
    from audit.store.signing import Signer
    from gateway.catalog import Catalog
    from gateway.policy import PolicySet, RetentionTable

    policies = PolicySet.load(ROOT / "policies", Catalog.load())
    policy = policies.get("compliance_review").model_copy(
        update={"retention": RetentionTable(content_days=1)}
    )
    content, fp = policy.content(), policy.fingerprint
    with AuditStore.open(url, durability="os", signer=Signer.from_text(RECORD_KEY)) as store:
        for start in range(0, n, 500):
            drafts = []
            for i in range(start, min(n, start + 500)):
                rid = f"req_{i:08d}"
                amount = i - 1 if i % 4 == 3 else i  # every fourth repeats the one before
                body = f'{{"messages":[{{"role":"user","content":"pay {amount} GBP"}}]}}'
                common = {
                    "request_id": rid,
                    "task": "compliance_review",
                    "caller": "bench",
                    "policy_fingerprint": fp,
                    "request_hash": f"sha256:{i:064x}",
                }
                drafts.append(
                    EventDraft(
                        kind=EventKind.REQUEST,
                        **common,
                        policy_content=content,
                        payloads={"request_body": body.encode().ljust(300, b" ")},
                    )
                )
                drafts.append(
                    EventDraft(
                        kind=EventKind.RESPONSE,
                        **common,
                        data={"ok": True},
                        payloads={"response_body": f'{{"id":"msg_{i}"}}'.encode().ljust(300, b" ")},
                    )
                )
            store.append_many(drafts)


def purge(url: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, RECORD_KEY],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def one_round(tree: Path, backend: str, n: int) -> dict[str, Any]:
    """``tree``'s own bench at one size and backend, in a process of its own."""
    bench = str(tree / "bench" / "purge_bench.py")
    out = subprocess.run(
        [sys.executable, bench, "--requests", str(n), "--backends", backend],
        check=True,
        capture_output=True,
        text=True,
        cwd=tree,
    ).stdout
    start = out.index("\n[") + 1
    return dict(json.loads(out[start:])[0])


def against(baseline: Path, sizes: list[int], backends: list[str]) -> None:
    rows = []
    for n in sizes:
        for backend in backends:
            pair = {}
            for name, tree in (("this tree", ROOT), ("baseline", baseline)):
                before = load()
                r = one_round(tree, backend, n)
                pair[name] = r
                print(
                    f"{name:<9} {backend:<9} {n:>8}: {r['erased'] / r['seconds']:.0f} requests/s,"
                    f" {r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB, no-op rerun "
                    f"{r['again_seconds']:.1f} s; load {before} -> {load()}",
                    flush=True,
                )
            rate = {k: v["erased"] / v["seconds"] for k, v in pair.items()}
            rows.append({"backend": backend, "requests": n, **pair})
            print(f"    ratio (this tree / baseline): {rate['this tree'] / rate['baseline']:.2f}")
    print(json.dumps(rows, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", default="10000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--baseline", type=Path, help="an older tree to compare with")
    args = parser.parse_args()
    sizes = [int(s) for s in args.requests.split(",")]
    if args.baseline is not None:
        against(args.baseline.resolve(), sizes, args.backends.split(","))
        return
    results = []
    for backend in args.backends.split(","):
        for n in sizes:
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as folder:
                    url = f"sqlite:///{folder}/audit.db"
                    from audit import AuditStore
                    from audit.store.migrate import upgrade

                    AuditStore.open(url, durability="os").close()
                    build(url, n)
                    results.append({"backend": backend, "requests": n, **purge(url)})
            else:
                from audit.store.migrate import upgrade
                from tests.support.postgres import running_postgres

                with running_postgres() as server:
                    url = server.url(server.create_database())
                    upgrade(url)
                    build(url, n)
                    results.append({"backend": backend, "requests": n, **purge(url)})
            r = results[-1]
            print(
                f"{r['backend']:<9} {n:>8} requests: {r['erased']} erased in {r['seconds']:.1f} s "
                f"({r['erased'] / r['seconds']:.0f} requests/s), {r['removed']} payloads removed, "
                f"{r['kept']} kept; peak RSS {r['peak_rss_mb']:.0f} MB; "
                f"second (no-op) purge {r['again_seconds']:.1f} s",
                flush=True,
            )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
