"""Interleaved c=1 gateway benchmark: the raw SDK, sync and async misses and hits, one run.

Every round calls each scenario once (order rotated every round), so load drift hits all
scenarios alike. Sync calls are made directly from the one event loop's thread (nothing else
runs on the loop at c=1), async calls are awaited on that loop. Uses the repo's own bench
helpers (fake in its own process, policies, structlog JSON into /dev/null).

    .venv/bin/python bench/interleaved_bench.py --rounds 400 [--json out.json]

To compare two trees in one sitting (before and after a change), give the old tree (e.g. a
``git archive`` of the commit before the change, unpacked): ``--baseline TREE --pairs 2`` runs
this script in a child process per tree, alternating (baseline, this tree, baseline, ...), each
importing the gateway from its own tree, and prints every run's added latency as a ratio to
the raw SDK's p50 of the same run:

    git archive BASE | tar -x -C /tmp/base
    .venv/bin/python bench/interleaved_bench.py --rounds 400 --baseline /tmp/base --pairs 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.getcwd())

import anthropic
import structlog

import gateway
from bench.fsync_probe import probe
from bench.gateway_bench import (
    API_KEY,
    PROMPT,
    fake_api,
    raw_kwargs,
    write_policies,
)
from gateway import AsyncGateway, Gateway
from gateway.logging import configure_logging


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(len(s) * q + 0.999999) - 1))]


def boot_diff(a: list[float], b: list[float], n: int = 2000) -> tuple[float, float]:
    """95 % bootstrap interval of median(a) - median(b)."""
    rng = random.Random(1)
    d = []
    for _ in range(n):
        d.append(
            statistics.median(rng.choices(a, k=len(a)))
            - statistics.median(rng.choices(b, k=len(b)))
        )
    d.sort()
    return d[int(0.025 * n)], d[int(0.975 * n)]


async def run(args: argparse.Namespace, base_url: str, work: Path) -> dict:
    pol = work / "policies"
    write_policies(pol)

    def kw(name: str, durability: str) -> dict:
        return {
            "policy_dir": pol,
            "database_url": f"sqlite:///{work / (name + '.db')}",
            "anthropic_api_key": API_KEY,
            "base_url": base_url,
            "durability": durability,
        }

    raw_s = anthropic.Anthropic(api_key=API_KEY, base_url=base_url, max_retries=0)
    raw_a = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=base_url, max_retries=0)
    g_os = Gateway(**kw("miss-os-sync", "os"))
    g_fs = Gateway(**kw("miss-fsync-sync", "fsync"))
    g_hit = Gateway(**kw("hit-os-sync", "os"))
    a_os = AsyncGateway(**kw("miss-os-async", "os"))
    a_fs = AsyncGateway(**kw("miss-fsync-async", "fsync"))
    a_hit = AsyncGateway(**kw("hit-os-async", "os"))
    rk = raw_kwargs(PROMPT)

    async def call_raw_s() -> bool:
        raw_s.messages.create(**rk)
        return False

    async def call_raw_a() -> bool:
        await raw_a.messages.create(**rk)
        return False

    def sync_gw(gw: Gateway, task: str):
        async def c() -> bool:
            return gw.complete(task, PROMPT, caller="bench").cached

        return c

    def async_gw(gw: AsyncGateway, task: str):
        async def c() -> bool:
            return (await gw.complete(task, PROMPT, caller="bench")).cached

        return c

    calls = {
        "raw/sync": call_raw_s,
        "raw/async": call_raw_a,
        "miss-os/sync": sync_gw(g_os, "bench_record"),
        "miss-fsync/sync": sync_gw(g_fs, "bench_record"),
        "hit-os/sync": sync_gw(g_hit, "bench_replay"),
        "miss-os/async": async_gw(a_os, "bench_record"),
        "miss-fsync/async": async_gw(a_fs, "bench_record"),
        "hit-os/async": async_gw(a_hit, "bench_replay"),
    }
    names = list(calls)
    samples: dict[str, list[float]] = {n: [] for n in names}
    cached: dict[str, int] = {n: 0 for n in names}
    pc = time.perf_counter
    for r in range(args.warmup + args.rounds):
        k = r % len(names)
        order = names[k:] + names[:k]
        for n in order:
            t0 = pc()
            hit = await calls[n]()
            dt = (pc() - t0) * 1000
            if r >= args.warmup:
                samples[n].append(dt)
                cached[n] += bool(hit)
    raw_s.close()
    await raw_a.close()
    for g in (g_os, g_fs, g_hit):
        g.close()
    for g in (a_os, a_fs, a_hit):
        await g.aclose()
    return {"samples": samples, "cached": cached}


def report(out: dict) -> dict:
    s = out["samples"]
    p50 = {n: statistics.median(v) for n, v in s.items()}
    rs, ra = p50["raw/sync"], p50["raw/async"]
    rows = {}
    for n, v in s.items():
        api = n.split("/")[1]
        base = rs if api == "sync" else ra
        rows[n] = {
            "p50": round(p50[n], 3),
            "p99": round(pct(v, 0.99), 3),
            "mean": round(statistics.fmean(v), 3),
            "cached": out["cached"][n] / len(v),
        }
        if not n.startswith("raw"):
            lo, hi = boot_diff(v, s["raw/" + api])
            rows[n].update(
                added=round(p50[n] - base, 3),
                added_ci95=[round(lo, 3), round(hi, 3)],
                x_raw_added=round((p50[n] - base) / base, 2),
                x_raw=round(p50[n] / base, 2),
            )
    derived = {
        "async_added_over_sync_added (os)": round(
            rows["miss-os/async"]["added"] / rows["miss-os/sync"]["added"], 2
        ),
        "async_added_over_sync_added (fsync)": round(
            rows["miss-fsync/async"]["added"] / rows["miss-fsync/sync"]["added"], 2
        ),
        "miss-os/async added vs raw/sync": round(p50["miss-os/async"] - rs, 3),
    }
    return {"rows": rows, "derived": derived}


SUMMARY = ("miss-os/sync", "miss-fsync/sync", "hit-os/sync", "miss-os/async", "hit-os/async")


def compare_trees(args: argparse.Namespace) -> None:
    """Alternate child runs of this script in the baseline tree and in this one."""
    trees = {"baseline": args.baseline.resolve(), "this tree": Path(os.getcwd()).resolve()}
    script = Path(__file__).resolve()
    runs: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="gw-compare-") as tmp:
        for n in range(args.pairs):
            for label, tree in trees.items():
                out = Path(tmp) / f"{n}-{label.replace(' ', '_')}.json"
                cmd = [sys.executable, str(script), "--rounds", str(args.rounds)]
                cmd += ["--warmup", str(args.warmup), "--json", str(out)]
                subprocess.run(cmd, cwd=tree, check=True, stdout=subprocess.DEVNULL)
                runs.append((label, json.loads(out.read_text())))
    print(f"{'run':<12}{'load':>6}{'raw p50':>9}" + "".join(f"{n:>18}" for n in SUMMARY))
    for label, rep in runs:
        rows, load = rep["rows"], rep["loadavg_before_after"][0][0]
        cells = "".join(
            f"{'{:+.3f} {:.2f}x'.format(rows[n]['added'], rows[n]['x_raw_added']):>18}"
            for n in SUMMARY
        )
        print(f"{label:<12}{load:>6.2f}{rows['raw/sync']['p50']:>9.3f}{cells}")
    print("cells: p50 added over the raw SDK of the same api (ms), and that as a ratio to it")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=600)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--baseline", type=Path, help="another source tree to run alternately")
    ap.add_argument("--pairs", type=int, default=2, help="with --baseline: runs per tree")
    args = ap.parse_args()
    if args.baseline is not None:
        compare_trees(args)
        return
    configure_logging()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=devnull))
    print("gateway from", gateway.__file__, file=sys.stderr)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gw-interleaved-") as tmp, fake_api(False) as url:
        work = Path(tmp)
        fs = probe(work, rounds=100)
        out = asyncio.run(run(args, url, work))
    load1 = os.getloadavg()
    rep = report(out)
    rep["loadavg_before_after"] = [load0, load1]
    rep["fsync_probe_ms"] = fs
    print(f"load {load0} -> {load1}")
    print("fsync probe p50 ms: " + ", ".join(f"{k} {v['p50']}" for k, v in fs.items()))
    print(
        f"{'scenario':<18}{'p50':>8}{'p99':>8}{'mean':>8}{'added':>9}{'CI95 added':>18}"
        f"{'add/raw':>9}{'x raw':>7}{'cached':>7}"
    )
    for n, r in rep["rows"].items():
        ci = r.get("added_ci95")
        print(
            f"{n:<18}{r['p50']:>8.3f}{r['p99']:>8.3f}{r['mean']:>8.3f}"
            f"{(('{:+.3f}'.format(r['added'])) if 'added' in r else ''):>9}"
            f"{(('[{:+.3f},{:+.3f}]'.format(*tuple(ci))) if ci else ''):>18}"
            f"{(('{:.2f}'.format(r['x_raw_added'])) if 'added' in r else ''):>9}"
            f"{(('{:.2f}'.format(r['x_raw'])) if 'added' in r else ''):>7}{r['cached']:>7.2f}"
        )
    for k, v in rep["derived"].items():
        print(f"{k}: {v}")
    if args.json:
        args.json.write_text(json.dumps({**rep, "samples": out["samples"]}, indent=1))


if __name__ == "__main__":
    main()
