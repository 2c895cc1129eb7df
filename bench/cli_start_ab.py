"""Where a read command's start-up goes, and a close A/B of it between two trees.

    .venv/bin/python bench/cli_start_ab.py --rounds 12 --base /tmp/base     # A/B, interleaved
    .venv/bin/python bench/cli_start_ab.py --rounds 5 --breakdown            # this tree only

The log holds one request recorded with the offline model (as bench/cli_start_bench.py).

A/B: `gateway audit list` and `gateway audit show ID`, each a fresh process, the base tree's
run and this tree's run one after the other in every round, so both see the same load; the
figure is the process's CPU time (user + system), median and quartiles. A third line runs
this tree's `audit list` ended by ``os._exit`` after the command: what the interpreter's own
exit (finalizers, module teardown) costs.

Breakdown (``--breakdown``): in the process, the command's CPU time, and the part pydantic
accounts for: its packages' import, timed at the loader (each module's own time inside
``importlib._bootstrap._load_unlocked``, which sees ``importlib.import_module`` as well, unlike
``python -X importtime``), plus the creation of model classes (a hook on pydantic's model
metaclass, less the imports made meanwhile).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run in the measured process (python -c): the command with the two timers.
BREAKDOWN = """
import sys, time, importlib._bootstrap as boot
PYDANTIC = ("pydantic", "pydantic_core", "annotated_types", "typing_inspection")
load, own, stack = boot._load_unlocked, {}, []
def timed(spec):
    started = time.process_time()
    stack.append(0.0)
    try:
        return load(spec)
    finally:
        spent = time.process_time() - started
        own[spec.name] = own.get(spec.name, 0.0) + spent - stack.pop()
        if stack:
            stack[-1] += spent
boot._load_unlocked = timed
started = time.process_time()
from pydantic._internal import _model_construction as construction
new, classes, depth = construction.ModelMetaclass.__new__, [0.0, 0], [0]
def counted(mcs, *args, **kwargs):
    depth[0] += 1
    began, imported = time.process_time(), sum(own.values())
    try:
        return new(mcs, *args, **kwargs)
    finally:
        depth[0] -= 1
        if depth[0] == 0:
            classes[0] += time.process_time() - began - (sum(own.values()) - imported)
            classes[1] += 1
construction.ModelMetaclass.__new__ = counted
from gateway.cli import main
try:
    main.main(args=sys.argv[1:])
except SystemExit:
    pass
total = time.process_time() - started
imported = sum(v for k, v in own.items() if k.split(".")[0] in PYDANTIC)
print("BREAKDOWN", total, imported, classes[0], classes[1], file=sys.stderr)
"""

EXITING = """
import os, sys
from gateway.cli import main
try:
    main.main(args=sys.argv[1:])
except SystemExit:
    pass
sys.stdout.flush()
os._exit(0)
"""


def _cpu(args: list[str], env: dict[str, str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _log(folder: Path, env: dict[str, str]) -> str:
    """A log with one request recorded with the offline model; its request id."""
    gateway = [sys.executable, "-m", "gateway"]
    for args in (["db", "upgrade"], ["ask", "offline_demo", "What is a sanctions screen?"]):
        subprocess.run([*gateway, *args], env=env, cwd=folder, check=True, capture_output=True)
    listed = subprocess.run(
        [*gateway, "audit", "list", "--format", "json"],
        env=env, cwd=folder, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return str(json.loads(listed.stdout)[0]["request_id"])


def _summary(name: str, runs: list[float]) -> str:
    low, _, high = statistics.quantiles(runs, n=4) if len(runs) > 1 else (runs[0],) * 3
    return f"| {name} | {statistics.median(runs):.3f} | {low:.3f}-{high:.3f} | {len(runs)} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--base", type=Path, help="the baseline tree (a `git archive` copy)")
    parser.add_argument("--breakdown", action="store_true")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cli-start-ab-"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")},
        "PYTHONPATH": str(ROOT),
        "GATEWAY_DATABASE_URL": f"sqlite:///{folder / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(ROOT / "policies"),
    }
    request_id = _log(folder, env)
    commands = {"audit list": ["audit", "list"], "audit show ID": ["audit", "show", request_id]}
    print(f"{options.rounds} rounds; load {os.getloadavg()[0]:.1f}")
    if options.breakdown:
        print("| command | CPU in-process (s) | pydantic import (s) | model classes (s) | share |")
        print("|---|---|---|---|---|")
        for _ in range(options.rounds):
            for name, args in commands.items():
                done = subprocess.run(
                    [sys.executable, "-c", BREAKDOWN, *args],
                    env=env, cwd=folder, capture_output=True, text=True, check=False,
                )  # fmt: skip
                line = next(x for x in done.stderr.splitlines() if x.startswith("BREAKDOWN"))
                total, imported, made, count = (float(x) for x in line.split()[1:])
                share = (imported + made) / total
                print(
                    f"| {name} | {total:.3f} | {imported:.3f} | {made:.3f} ({count:.0f}) "
                    f"| {share:.0%} |"
                )
        return
    trees = {"new": ROOT, **({"base": options.base} if options.base else {})}
    runs: dict[str, list[float]] = {}
    for _ in range(options.rounds):
        for name, args in commands.items():
            for tree, path in trees.items():
                tree_env = {**env, "PYTHONPATH": str(path)}
                cpu = _cpu([sys.executable, "-m", "gateway", *args], tree_env, folder)
                runs.setdefault(f"{tree}: `gateway {name}`", []).append(cpu)
        ended = _cpu([sys.executable, "-c", EXITING, "audit", "list"], env, folder)
        runs.setdefault("new: `gateway audit list`, ended by os._exit", []).append(ended)
    print(f"load after {os.getloadavg()[0]:.1f}")
    print("| run | CPU median (s) | quartiles (s) | runs |")
    print("|---|---|---|---|")
    for name, values in sorted(runs.items()):
        print(_summary(name, values))


if __name__ == "__main__":
    main()
