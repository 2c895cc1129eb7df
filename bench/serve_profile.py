"""Where one served request's CPU goes: py-spy on a `gateway serve` process, by category.

    $ .venv/bin/pip install py-spy           # not a project dependency: a profiling tool
    $ .venv/bin/python bench/serve_profile.py --durability fsync --c 1 --calls 600
    $ .venv/bin/python bench/serve_profile.py --durability os --c 32 --calls 3000
    $ .venv/bin/python bench/serve_profile.py --tree /tmp/base-leanpath ...   # another tree
    $ .venv/bin/python bench/serve_profile.py --hits --calls 2000   # replay hits, not misses

One fake upstream (its own process), one `gateway serve` (one worker) on a fresh SQLite
database, the official SDK as the client (sync at c=1, ``AsyncAnthropic`` at c>1). py-spy
samples the server's threads with native frames (``--native``); samples whose innermost
frame waits (a futex, the loop's poll, an fsync: ``IDLE_LEAVES``) are dropped while the calls run;
each sample is put in the first category, from the innermost frame outwards, whose rule
matches (``CATEGORIES``). The table gives each category's share of the samples and, scaled
by the process's measured CPU per request, its milliseconds per request.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402

from bench.gateway_bench import fake_api  # noqa: E402
from bench.server_bench import SERVER_PIDS, concurrent, gateway_server, served_env  # noqa: E402
from bench.throughput_bench import BODY, HIT_TASK, TASK, caller_key, tree_cpu  # noqa: E402

# (category, substrings of a frame's "function (file:line)"): the first match from the
# innermost frame outwards names the sample.
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("audit: SQLite commit / fsync", ("_writers.py", "sqlite3")),
    ("audit: signing", ("signing.py", "cryptography")),
    ("audit: canonical JSON / hashing", ("canonical", "chain.py", "sealing.py", "hashlib")),
    ("audit: prepare / link", ("audit/store/",)),
    ("logging", ("structlog", "gateway/_log.py", "gateway/logging.py", "logging/__init__")),
    ("thread hand-offs", ("gateway/request/_threads.py", "threading.py", "_group.py")),
    ("upstream leg (SDK / httpx)", ("gateway/providers/", "anthropic/", "httpx", "httpcore")),
    ("request building / records", ("gateway/request/", "gateway/result.py")),
    ("planning / policy", ("gateway/policy/", "gateway/_attachment")),
    ("served layer (routes, auth, access log)", ("gateway/server/",)),
    ("HTTP layer (uvicorn, h11, starlette)", ("uvicorn", "h11", "starlette", "anyio")),
    ("JSON (stdlib)", ("json/",)),
    ("event loop and sockets", ("asyncio", "selectors.py", "uvloop", "socket")),
]


# Leaves that wait rather than run (py-spy --native samples every thread, idle or not): a
# futex (a lock, a condition: an unnamed libc address), the event loop's poll, an fsync.
IDLE_LEAVES = ("epoll_pwait", "epoll_wait", "fdatasync", "fsync (", "poll (", "select (")


def idle(stack: str) -> bool:
    leaf = stack.rsplit(";", 1)[-1]
    return leaf.startswith(IDLE_LEAVES) or (leaf.startswith("0x") and "(libc.so" in leaf)


def category(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for name, needles in CATEGORIES:
            if any(n in frame for n in needles):
                return name
    return "other"


async def drive(url: str, key: str, calls: int, c: int, task: str = TASK) -> float:
    if c == 1:
        client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
        started = time.perf_counter()
        for _ in range(calls):
            client.messages.create(model=task, **BODY)
        return time.perf_counter() - started
    aclient = anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0)
    _, wall = await concurrent(lambda n: aclient.messages.create(model=task, **BODY), calls, c)
    await aclient.close()
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--durability", default="fsync", choices=("fsync", "os"))
    parser.add_argument("--c", type=int, default=1)
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--no-spy", action="store_true", help="CPU per request only")
    parser.add_argument(
        "--hits", action="store_true", help="replay hits (one recorded answer served again)"
    )
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    root = Path(tempfile.mkdtemp(prefix="serve-profile-"))
    home = root / "home"
    shutil.copytree(ROOT / "policies", home / "policies")
    out = args.raw or root / "stacks.txt"
    with fake_api(in_process=False) as fake_url:
        env = served_env(home, fake_url)
        env["GATEWAY_DURABILITY"] = args.durability
        key = caller_key(env)
        with gateway_server(env, 1, args.tree) as url:
            pid = SERVER_PIDS[url]
            task = HIT_TASK if args.hits else TASK
            asyncio.run(drive(url, key, 64, min(args.c, 32), task))  # warm-up (records a hit's)
            load0 = os.getloadavg()[0]
            cpu0 = tree_cpu(pid)
            spy_proc = (
                None
                if args.no_spy
                else subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(pid),
                        "--rate",
                        str(args.rate),
                        "--format",
                        "raw",
                        "--threads",
                        "--native",
                        "--output",
                        str(out),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            time.sleep(1.0)  # py-spy attaches
            cpu1 = tree_cpu(pid)
            wall = asyncio.run(drive(url, key, args.calls, args.c, task))
            cpu2 = tree_cpu(pid)
            if spy_proc is not None:
                spy_proc.send_signal(signal.SIGINT)
                spy_proc.wait(timeout=60)
    cpu_ms = (cpu2 - cpu1) * 1000 / args.calls
    counts: Counter[str] = Counter()
    for line in out.read_text().splitlines() if spy_proc is not None else []:
        stack, _, n = line.rpartition(" ")
        if idle(stack):
            continue
        counts[category(stack)] += int(n)
    total = sum(counts.values()) or 1
    print(
        f"{args.durability}, c={args.c}, {args.calls} {'hits' if args.hits else 'calls'} "
        f"in {wall:.1f} s "
        f"({args.calls / wall:.0f} req/s); server CPU {cpu_ms:.2f} ms/request "
        f"(py-spy's own attach: {(cpu1 - cpu0) * 1000:.0f} ms); load {load0:.1f} -> "
        f"{os.getloadavg()[0]:.1f}; {total} samples"
    )
    print("\n| where | share | ms / request |\n|---|---|---|")
    for name, n in counts.most_common():
        print(f"| {name} | {n / total:.1%} | {cpu_ms * n / total:.2f} |")
    if args.raw is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
