"""`gateway serve` against the fake directly, with the official Python SDK as the client.

    $ .venv/bin/python bench/server_bench.py                          # about a minute
    $ .venv/bin/python bench/server_bench.py --calls 600 --c32-calls 2000 --workers 2

In one run, on the loopback fake (its own process) and a fresh SQLite file (durability os):

- ``direct``: ``anthropic.Anthropic(base_url=fake).messages.create`` with the body the
  gateway sends for the ``record`` task (``quant_strategy``: every call goes upstream and
  writes REQUEST and RESPONSE);
- ``served``: the same SDK call with ``base_url`` at `gateway serve` and ``model`` naming the
  task, authenticated with a caller key;
- ``library``: ``AsyncGateway.complete`` in-process, the same request (what the gateway
  itself adds, so that ``served - library`` is the HTTP layer's share).

c=1 runs the three interleaved, call by call (each round in a shuffled order), so load
changes hit all alike; the figure is the p50 each adds over ``direct``, and the server
process's CPU time per call (load-independent, one worker only). c=32 runs ``direct`` and
``served`` with ``AsyncAnthropic`` and 32 calls in flight: throughput and p50/p99, in four
slices per kind whose order alternates. ``--streams`` adds c=128 ``messages.stream`` (direct,
served, and the baseline tree's). ``--baseline TREE`` runs a second `gateway serve` from
another source tree (e.g. ``git archive <commit>`` unpacked) on the same database and fake,
interleaved with the others: a before/after under the same load. Results print as a
Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
import httpx2 as httpx  # noqa: E402

from bench.gateway_bench import fake_api  # noqa: E402

TASK = "quant_strategy"
MODEL = "claude-opus-4-6"


SERVER_PIDS: dict[str, int] = {}  # url -> the server process, for its CPU time


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time (Linux /proc), robust to the machine's load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_ns(pid: int) -> int:
    """The CPU time of a process's live threads in nanoseconds (Linux schedstat): fine
    enough to time one call of an otherwise idle server (``cpu_seconds`` counts in ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total


def served_env(home: Path, fake_url: str) -> dict[str, str]:
    """The environment of a `gateway serve` on ``home``'s policies and database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "ANTHROPIC_"))}
    env.update(
        {
            "GATEWAY_POLICY_DIR": str(home / "policies"),
            "GATEWAY_DATABASE_URL": f"sqlite:///{home / 'audit.db'}",
            "GATEWAY_DURABILITY": "os",
            "ANTHROPIC_API_KEY": "sk-bench",
            "ANTHROPIC_BASE_URL": fake_url,
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def gateway_server(env: dict[str, str], workers: int, tree: Path = ROOT) -> Iterator[str]:
    port = free_port()
    command = ["-m", "gateway", "serve", "--port", str(port), "--workers", str(workers)]
    with served_process(
        [sys.executable, *command],
        port,
        f"gateway serve from {tree}",
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tree,
    ) as url:
        yield url


@contextmanager
def served_process(
    command: list[str],
    port: int,
    what: str,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
) -> Iterator[str]:
    """Run a server process (``command``) on ``port`` until it answers ``/readyz``; its URL,
    with its pid in ``SERVER_PIDS``; stopped with SIGTERM on leaving."""
    child = subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # the access log is rendered, as a service would
    )
    url = f"http://127.0.0.1:{port}"
    SERVER_PIDS[url] = child.pid
    try:
        deadline = time.monotonic() + 120  # a loaded machine starts a server slowly
        while True:
            if child.poll() is not None:  # say so here, not as "connection refused" later
                raise SystemExit(f"{what} exited ({child.returncode})")
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} was not ready in 120 s")
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=60)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row(name: str, ms: list[float], wall: float, base: float | None) -> str:
    p50 = statistics.median(ms)
    added = f"+{p50 - base:.2f}" if base is not None else ""
    return (
        f"| {name} | {len(ms)} | {p50:.2f} | {pct(ms, 0.99):.2f} | {statistics.fmean(ms):.2f} "
        f"| {len(ms) / wall:.0f} | {added} |"
    )


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


async def concurrent(
    call: Callable[[int], Awaitable[Any]], calls: int, c: int
) -> tuple[list[float], float]:
    ms: list[float] = []
    counter = iter(range(calls))

    async def worker() -> None:
        for n in counter:
            started = time.perf_counter()
            await call(n)
            ms.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(c)))
    return ms, time.perf_counter() - started


async def interleaved_rounds(
    kinds: list[tuple[str, Callable[[int], Awaitable[Any]]]], calls: int, c: int, rounds: int = 4
) -> dict[str, tuple[list[float], float]]:
    """``calls`` per kind at concurrency ``c``, in ``rounds`` slices whose order alternates,
    so that a change of load during the run hits every kind alike."""
    out: dict[str, tuple[list[float], float]] = {name: ([], 0.0) for name, _ in kinds}
    for r in range(rounds):
        for name, call in kinds if r % 2 == 0 else list(reversed(kinds)):
            ms, wall = await concurrent(call, calls // rounds, c)
            out[name] = (out[name][0] + ms, out[name][1] + wall)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400, help="timed calls per kind at c=1")
    parser.add_argument("--c32-calls", type=int, default=1600)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--streams", action="store_true", help="also c=128 streams")
    parser.add_argument(
        "--baseline", type=Path, help="also serve from this source tree (before/after)"
    )
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="server-bench-"))
    shutil.copytree(ROOT / "policies", home / "policies")
    with fake_api(in_process=False) as fake_url:  # its own process, as in gateway_bench
        env = served_env(home, fake_url)
        os.environ.update(env)
        from gateway import AsyncGateway, Settings
        from gateway.callers import CallerKeys
        from gateway.logging import configure_logging

        settings = Settings.from_env()
        with CallerKeys.open(settings) as keys:
            caller_key = keys.create("bench").key
        with ExitStack() as servers:
            served_url = servers.enter_context(gateway_server(env, args.workers))
            baseline_url = (
                servers.enter_context(gateway_server(env, args.workers, args.baseline))
                if args.baseline
                else None
            )
            report(
                args,
                fake_url,
                served_url,
                baseline_url,
                caller_key,
                settings,
                AsyncGateway,
                configure_logging,
            )
    shutil.rmtree(home, ignore_errors=True)


def report(
    args: argparse.Namespace,
    fake_url: str,
    served_url: str,
    baseline_url: str | None,
    caller_key: str,
    settings: Any,
    gateway_class: Any,
    configure_logging: Any,
) -> None:
    body = {"max_tokens": 256, "messages": [{"role": "user", "content": "Momentum on FX majors"}]}
    direct = anthropic.Anthropic(base_url=fake_url, api_key="sk-bench", max_retries=0)
    served = anthropic.Anthropic(base_url=served_url, api_key=caller_key, max_retries=0)
    devnull = open(os.devnull, "w")  # noqa: SIM115 - open for the whole run
    sys.stderr = devnull  # the library's log lines, rendered as a service would, then dropped
    configure_logging()

    loop = asyncio.new_event_loop()
    library = gateway_class(settings)

    def lib_call() -> None:
        loop.run_until_complete(
            library.complete(
                TASK, messages=body["messages"], caller="bench", overrides={"max_tokens": 256}
            )
        )

    kinds: dict[str, Callable[[], Any]] = {
        "direct SDK → fake": lambda: direct.messages.create(model=MODEL, **body),
        "SDK → gateway serve → fake": lambda: served.messages.create(model=TASK, **body),
        "AsyncGateway in-process → fake": lib_call,
    }
    if baseline_url is not None:
        before = anthropic.Anthropic(base_url=baseline_url, api_key=caller_key, max_retries=0)
        kinds["SDK → gateway serve (baseline tree) → fake"] = lambda: before.messages.create(
            model=TASK, **body
        )
    for call in kinds.values():  # warm-up: connections, the SDK's first-call costs
        for _ in range(30):
            call()
    c1: dict[str, list[float]] = {name: [] for name in kinds}
    servers = {"SDK → gateway serve → fake": served_url}
    if baseline_url is not None:
        servers["SDK → gateway serve (baseline tree) → fake"] = baseline_url
    cpu_before = {name: cpu_seconds(SERVER_PIDS[url]) for name, url in servers.items()}
    order = list(kinds.items())
    shuffler = random.Random(14)  # each round in its own order: no kind always follows another
    for _ in range(args.calls):
        shuffler.shuffle(order)
        for name, call in order:
            c1[name].append(timed(call))
    cpu_ms = {
        name: (cpu_seconds(SERVER_PIDS[url]) - cpu_before[name]) * 1000 / args.calls
        for name, url in servers.items()
    }
    loop.run_until_complete(library.aclose())
    loop.close()

    async def at_32() -> dict[str, tuple[list[float], float]]:
        out = {}
        async with (
            anthropic.AsyncAnthropic(
                base_url=fake_url, api_key="sk-bench", max_retries=0
            ) as adirect,
            anthropic.AsyncAnthropic(
                base_url=served_url, api_key=caller_key, max_retries=0
            ) as aserved,
        ):
            at32: list[tuple[str, Callable[[int], Awaitable[Any]]]] = [
                ("direct SDK → fake", lambda n: adirect.messages.create(model=MODEL, **body)),
                (
                    "SDK → gateway serve → fake",
                    lambda n: aserved.messages.create(model=TASK, **body),
                ),
            ]
            if baseline_url is not None:
                abefore = anthropic.AsyncAnthropic(
                    base_url=baseline_url, api_key=caller_key, max_retries=0
                )
                at32.append(
                    (
                        "SDK → gateway serve (baseline tree) → fake",
                        lambda n: abefore.messages.create(model=TASK, **body),
                    )
                )
            for _name, call in at32:
                await concurrent(call, 64, 32)  # warm-up
            out.update(await interleaved_rounds(at32, args.c32_calls, 32))
            if args.streams:

                async def stream(client: Any, model: str) -> None:
                    async with client.messages.stream(model=model, **body) as s:
                        await s.get_final_message()

                streams: list[tuple[str, Callable[[int], Awaitable[Any]]]] = [
                    ("stream: direct (c=128)", lambda n: stream(adirect, MODEL)),
                    ("stream: via serve (c=128)", lambda n: stream(aserved, TASK)),
                ]
                if baseline_url is not None:
                    streams.append(
                        (
                            "stream: via serve, baseline tree (c=128)",
                            lambda n: stream(abefore, TASK),
                        )
                    )
                for _name, call in streams:
                    await concurrent(call, 128, 128)  # warm-up
                out.update(await interleaved_rounds(streams, args.c32_calls, 128))
        return out

    c32 = asyncio.run(at_32())
    sys.stderr = sys.__stderr__
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, "
        f"anthropic {anthropic.__version__}, workers {args.workers}, load {os.getloadavg()[0]:.1f}"
    )
    print("\n| c=1 (interleaved) | calls | p50 ms | p99 ms | mean ms | calls/s | +p50 ms |")
    print("|---|---|---|---|---|---|---|")
    base = statistics.median(c1["direct SDK → fake"])
    for name, ms in c1.items():
        # Interleaved, so each kind's own time is its calls' sum (calls/s one after another).
        print(row(name, ms, sum(ms) / 1000, None if name.startswith("direct") else base))
    if args.workers == 1:
        print("\n| c=1 | server process CPU ms per call (user + system) |")
        print("|---|---|")
        for name, ms_cpu in cpu_ms.items():
            print(f"| {name} | {ms_cpu:.2f} |")
    print("\n| concurrent | calls | p50 ms | p99 ms | mean ms | calls/s | +p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for name, (ms, wall) in c32.items():
        label = name if "c=128" in name else f"{name} (c=32)"
        print(row(label, ms, wall, None))


if __name__ == "__main__":
    main()
