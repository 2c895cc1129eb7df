"""CPU per call of the library path, this tree against another, in one run: a replay memo hit,
a plain miss, and a miss carrying 30 KB of caller parts (issue 29 item 2, issue 23's speed).

    $ .venv/bin/python bench/lean_leg_bench.py --baseline /tmp/base --rounds 4 --calls 400

CPU time (``time.process_time`` of the whole process: the caller's thread, the audit worker
threads and the group committer) is what a loaded, shared machine disturbs least; wall times
here would mostly measure the other tenants. Each round runs every (tree, kind) once, in a
fresh process per tree and kind, trees alternating, against one loopback fake in its own
process; the figure is the median over rounds of the CPU per call. Kinds:

- ``hit``: ``bench_replay``, the same prompt each time: a memo hit (the erasure lookup, the
  CACHE_HIT append);
- ``miss``: ``bench_record``, the plain prompt of bench/gateway_bench.py (upstream each time);
- ``caller parts miss``: the shipped ``general_assistant`` policy with the caller system prompt
  and 20 tools of bench/clients_bench.py (record mode: upstream each time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("hit", "miss", "caller parts miss")


def child(kind: str, calls: int, fake_url: str, home: Path) -> None:
    """Run in a worker process whose PYTHONPATH is the tree under test: print CPU ms per call."""
    import structlog

    from bench.gateway_bench import API_KEY, PROMPT, write_policies
    from gateway import Gateway
    from gateway.logging import configure_logging

    configure_logging()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=devnull))
    policies = home / "policies"
    if kind == "caller parts miss":
        shutil.copytree(ROOT / "policies", policies)
    else:
        write_policies(policies)
    gw = Gateway(
        policy_dir=policies,
        database_url=f"sqlite:///{home / 'audit.db'}",
        anthropic_api_key=API_KEY,
        base_url=fake_url,
        durability="os",
    )
    if kind == "caller parts miss":
        from bench.clients_bench import QUESTION, SYSTEM, caller_tools

        tools = caller_tools()

        def call() -> object:
            return gw.complete(
                "general_assistant",
                messages=QUESTION,
                caller="bench",
                overrides={"system": SYSTEM, "tools": tools, "max_tokens": 1024},
            )
    else:
        task = "bench_replay" if kind == "hit" else "bench_record"

        def call() -> object:
            return gw.complete(task, PROMPT, caller="bench")

    for _ in range(50):  # warm-up: connections, the first hit's log read
        call()
    started = time.process_time()
    for _ in range(calls):
        call()
    print(json.dumps({"cpu_ms": (time.process_time() - started) * 1000 / calls}))
    gw.close()


def run(tree: Path, kind: str, calls: int, fake_url: str) -> float:
    home = Path(tempfile.mkdtemp(prefix="lean-bench-"))
    try:
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "lean_leg_bench.py"),
                "--child",
                kind,
                "--calls",
                str(calls),
                "--fake",
                fake_url,
                "--home",
                str(home),
            ],
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tree,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise SystemExit(f"{tree} {kind}: {out.stderr.strip().splitlines()[-1:]}")
        return float(json.loads(out.stdout.strip().splitlines()[-1])["cpu_ms"])
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=False)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--child")
    ap.add_argument("--fake")
    ap.add_argument("--home", type=Path)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.calls, args.fake, args.home)
        return
    sys.path.insert(0, str(ROOT))
    from bench.gateway_bench import fake_api

    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees["baseline"] = args.baseline
    cpu: dict[tuple[str, str], list[float]] = {(t, k): [] for t in trees for k in KINDS}
    loads = [os.getloadavg()[0]]
    with fake_api(False) as url:
        for n in range(args.rounds):
            order = list(trees.items()) if n % 2 == 0 else list(reversed(trees.items()))
            for kind in KINDS:
                for name, tree in order:
                    cpu[(name, kind)].append(run(tree, kind, args.calls, url))
            loads.append(os.getloadavg()[0])
    print(
        f"{args.rounds} rounds x {args.calls} calls; load (1 min) during the run "
        f"{min(loads):.1f}-{max(loads):.1f}\n"
    )
    print("| kind | " + " | ".join(f"{t} CPU ms/call" for t in trees) + " | ratio |")
    print("|---|" + "---|" * len(trees) + "---|")
    for kind in KINDS:
        medians = [statistics.median(cpu[(t, kind)]) for t in trees]
        ratio = f"{medians[0] / medians[1]:.2f}" if len(medians) == 2 else ""
        print(f"| {kind} | " + " | ".join(f"{m:.3f}" for m in medians) + f" | {ratio} |")


if __name__ == "__main__":
    main()
