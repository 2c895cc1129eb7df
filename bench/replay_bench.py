"""`gateway replay --all` speed and peak memory on generated logs, per mode (issue 16, items 1-2).

    $ .venv/bin/python bench/replay_bench.py                       # 20k and 200k requests
    $ .venv/bin/python bench/replay_bench.py --requests 20000 --rounds 3
    $ .venv/bin/python bench/replay_bench.py --requests 20000 --keep /tmp/replay-logs
    $ .venv/bin/python bench/replay_bench.py --requests 5000,50000 --modes model,verify-report

Each log is generated once: one compliance_review request is recorded through the real
gateway against the loopback fake (tests/fakes), and its REQUEST and RESPONSE are then repeated
with a distinct prompt per request, re-planned with the recorded policy (the same plan_request
and request hash the gateway uses), so every request verifies, and every body and answer is a
payload of its own. The log is appended in batches (``append_many``), signed by the gateway's
record key.

The command is then run in a fresh process, ``gateway replay --verify --all --format jsonl``
into /dev/null (the table form prints the same rows), each round on a fresh copy of the log
(a replay appends one REPLAY event per request). Reported: wall time, requests/s, and the
child's peak RSS (``ru_maxrss``). The machine is shared: rounds alternate between the sizes,
and the load average is printed with each figure. Beside wall time, the child's CPU time
(user + system) is reported, and requests per CPU second: on a loaded 2-core machine that is
the steadier figure (the wall time includes waiting for a core). Both include the process's
start-up (about 1.5 s of imports), which ``startup_s`` measures with ``gateway --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.replay_log import generate  # noqa: E402

# The replay command of each --mode (every one over --all); "report" also writes the HTML.
MODES = {
    "verify": ["--verify", "--format", "jsonl"],
    "verify-json": ["--verify", "--format", "json"],
    "verify-report": ["--verify", "--report", "{work}/report.html"],
    "model": ["--model", "claude-opus-4-7", "--format", "json"],
    "model-report": ["--model", "claude-opus-4-7", "--report", "{work}/report.html"],
}


def measure(folder: Path, work: Path, code: str = "", mode: str = "verify") -> dict[str, Any]:
    """One run of the command on a fresh copy of the log in ``folder``; ``code``: a source
    tree to run instead of this one (an older commit, for a before/after)."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(folder, work)
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": f"sqlite:///{work / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(ROOT / "policies"),
        "GATEWAY_DURABILITY": "os",
        **({"PYTHONPATH": code} if code else {}),
    }
    gateway = str(Path(sys.executable).with_name("gateway"))
    options = [o.replace("{work}", str(work)) for o in MODES[mode]]
    command = [gateway, "replay", "--all", "--operator", "bench", *options]
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = usage.ru_utime + usage.ru_stime
    subprocess.run([gateway, "replay", "--help"], env=env, capture_output=True, check=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    startup = usage.ru_utime + usage.ru_stime - cpu_before
    before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    started = time.perf_counter()
    with open(os.devnull, "w") as sink:
        done = subprocess.run(
            command, env=env, stdout=sink, stderr=subprocess.PIPE, text=True, check=False
        )
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kb = usage.ru_maxrss
    if done.returncode != 0:
        raise SystemExit(f"replay failed ({done.returncode}): {done.stderr[-2000:]}")
    return {
        "seconds": round(seconds, 2),
        # CPU seconds of the command (user + system): what the run costs on an idle core,
        # whatever the load from other work on a shared machine.
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime - cpu_before, 2),
        "startup_cpu_s": round(startup, 2),
        # ru_maxrss of all children so far: only an upper bound unless this run was the largest.
        "peak_rss_mb": round(peak_kb / 1024, 1) if peak_kb > before else None,
        "load": Path("/proc/loadavg").read_text().split()[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", default="20000,200000", help="comma-separated log sizes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--modes", default="verify", help=f"comma-separated, of: {', '.join(MODES)}"
    )
    parser.add_argument("--keep", type=Path, help="generate logs here (reused when present)")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        default="",
        help="also run the code in DIR (e.g. `git archive COMMIT | tar -x -C DIR`), interleaved",
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.requests.split(",")]
    base = args.keep or Path(tempfile.mkdtemp(prefix="replay-bench-"))
    logs = {}
    for n in sizes:
        folder = base / f"log-{n}"
        if not (folder / "audit.db").exists():
            folder.mkdir(parents=True, exist_ok=True)
            print(f"generating {n:,} requests ...", flush=True)
            print(f"  {generate(folder, n):.1f} s", flush=True)
        logs[n] = folder
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    codes = [("this", "")] + ([("baseline", args.baseline)] if args.baseline else [])
    modes = args.modes.split(",")
    for r in range(args.rounds):
        for n, mode in [(n, m) for n in sizes for m in modes][:: 1 if r % 2 == 0 else -1]:
            for name, code in codes if r % 2 == 0 else reversed(codes):
                # Each run in a process of its own, so ru_maxrss is that run's.
                one = [str(logs[n]), str(base / "work"), code, mode]
                out = subprocess.run(
                    [sys.executable, __file__, "--one", *one],
                    capture_output=True, text=True, check=True,
                ).stdout  # fmt: skip
                figure = {"code": name, "mode": mode, **json.loads(out)}
                figure["requests_per_s"] = round(n / figure["seconds"], 1)
                figure["requests_per_cpu_s"] = round(n / figure["cpu_seconds"], 1)
                # After start-up: the rate a long run approaches.
                work = figure["cpu_seconds"] - figure["startup_cpu_s"]
                figure["requests_per_cpu_s_after_startup"] = round(n / work, 1)
                results[n].append(figure)
                print(json.dumps({"requests": n, "round": r + 1, **figure}), flush=True)
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--one":
        print(json.dumps(measure(Path(sys.argv[2]), Path(sys.argv[3]), *sys.argv[4:])))
    else:
        main()
