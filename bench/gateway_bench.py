"""Gateway latency against the raw SDK call, on the loopback fake (issue 4, item 10).

    $ .venv/bin/python bench/gateway_bench.py                    # default run, about a minute
    $ .venv/bin/python bench/gateway_bench.py --calls 600 --concurrency 1,8,32 --pg-url auto
    $ .venv/bin/python bench/gateway_bench.py --profile miss-os  # cProfile one sync scenario
    $ .venv/bin/python bench/gateway_bench.py --stages           # ms per pipeline stage

In one run, for sync (threads) and async (``asyncio.gather``) callers at each concurrency:

- ``raw``: ``anthropic.Anthropic(api_key, base_url=fake, max_retries=0).messages.create`` with
  the body the gateway sends for the ``record`` task (``AsyncAnthropic`` for async);
- ``miss-fsync`` / ``miss-os``: a ``record`` policy (every call goes upstream and writes REQUEST
  and RESPONSE) on a fresh SQLite file with that durability;
- ``hit-os`` / ``hit-fsync``: a ``replay`` policy, the same request repeated (one recorded
  answer, then CACHE_HIT events). Identical requests share one lock (single flight), so at
  concurrency above 1 they queue behind each other;
- ``hit-spread-os``: a ``replay`` policy, one distinct request per worker (hits that do not
  share the lock);
- with ``--pg-url`` (a migrated-on-the-spot database URL, or ``auto`` for a throwaway server):
  ``miss-pg`` and ``hit-pg`` at durability ``fsync``.

Each call is timed from the caller's side; the figures are p50, p99 and mean per call,
throughput (calls/s over the level's wall time), and the p50 added over, and ratio to, the raw
call of the same kind (sync/async) and concurrency. The fake runs in its own process by
default, so its request handling does not hold this process's GIL (``--fake-in-process`` to
compare). Log events are rendered as JSON (as a service would) into /dev/null.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import math
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
import structlog  # noqa: E402

from bench.fsync_probe import probe, summarise  # noqa: E402
from gateway import AsyncGateway, Gateway  # noqa: E402
from gateway.logging import configure_logging  # noqa: E402
from gateway.request import Request  # noqa: E402

API_KEY = "sk-bench-not-a-secret"
SYSTEM = "You review transactions against the firm's rules. Answer in one short paragraph."
PROMPT = "Transaction: EUR 12,400 to a new counterparty in a high-risk jurisdiction. " * 4
RECORD_MODEL = "claude-opus-4-6"  # honours temperature: sent through extra_body, 2023-06-01
RECORD_TEMPERATURE = 0.8
MAX_TOKENS = 1024

POLICIES = {
    "bench_record": f"""\
schema = 1
description = "Benchmark task: every call goes upstream and is recorded."
owner = "platform-engineering"
reproducible = false

[model]
id = "{RECORD_MODEL}"

[generation]
max_tokens = {MAX_TOKENS}
temperature = {RECORD_TEMPERATURE}

[prompt]
system_file = "prompts/bench.md"

[output]
format = "text"

[cache]
mode = "record"
""",
    "bench_replay": f"""\
schema = 1
description = "Benchmark task: identical requests are served from the audit log."
owner = "platform-engineering"
reproducible = true

[model]
id = "claude-sonnet-4-6"

[generation]
max_tokens = {MAX_TOKENS}
temperature = 0.0

[prompt]
system_file = "prompts/bench.md"

[output]
format = "text"

[cache]
mode = "replay"
""",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    task: str | None  # None: the raw SDK call
    durability: str = "os"
    backend: str = "sqlite"
    spread: bool = False  # one distinct prompt per worker


@dataclass(frozen=True)
class Row:
    scenario: str
    api: str
    concurrency: int
    calls: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    calls_per_s: float
    cached: float  # share of timed calls served from the log
    added_p50_ms: float | None = None
    ratio_p50: float | None = None


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, math.ceil(len(ordered) * q) - 1)]


def make_row(
    scenario: str, api: str, c: int, samples: list[float], wall_s: float, cached: int
) -> Row:
    ordered = sorted(samples)
    return Row(
        scenario=scenario,
        api=api,
        concurrency=c,
        calls=len(ordered),
        p50_ms=round(statistics.median(ordered), 3),
        p99_ms=round(percentile(ordered, 0.99), 3),
        mean_ms=round(statistics.fmean(ordered), 3),
        calls_per_s=round(len(ordered) / wall_s, 1),
        cached=round(cached / len(ordered), 3),
    )


# -- the fake, in its own process ------------------------------------------------------------


def serve_fake() -> None:
    """Child mode: run the fake, print its URL, serve until stdin closes."""
    from tests.fakes.messages_api import FakeMessagesAPI

    # The fake keeps every request it saw: a few MB for a default run.
    with FakeMessagesAPI() as fake:
        deepen_backlog(fake)
        print(fake.base_url, flush=True)
        sys.stdin.read()


def deepen_backlog(fake: Any) -> None:
    """Let 32 callers (128 streams in bench/server_bench.py) connect at once.

    socketserver listens with a backlog of 5; 32 simultaneous connects then overflow the accept
    queue, and the kernel drops handshakes (a 1 s SYN retry) or resets them (``ReadError``).
    That is the fake's limit, not the gateway's, so the benchmark raises it: a second
    ``listen()`` on a listening socket only changes the backlog.
    """
    fake._server.socket.listen(256)


@contextmanager
def fake_api(in_process: bool) -> Iterator[str]:
    if in_process:
        from tests.fakes.messages_api import FakeMessagesAPI

        with FakeMessagesAPI() as fake:
            deepen_backlog(fake)
            yield fake.base_url
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve-fake"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


@contextmanager
def postgres_url(given: str | None) -> Iterator[str | None]:
    if given is None:
        yield None
        return
    from audit.store.migrate import upgrade

    if given != "auto":
        upgrade(given)
        yield given
        return
    from tests.support.postgres import running_postgres

    with running_postgres() as server:
        url = server.url(server.create_database())
        upgrade(url)
        yield url


# -- one level: run callers, time each call ---------------------------------------------------


def prompt_for(scenario: Scenario, worker: int) -> str:
    return f"{PROMPT} (worker {worker})" if scenario.spread else PROMPT


def run_threads(
    call: Callable[[int], bool], concurrency: int, per_worker: int
) -> tuple[list[float], float, int]:
    """``call(worker) -> cached`` from ``concurrency`` threads; latencies, wall time, hits."""
    # One untimed call per worker first: opens the pooled connections, primes per-worker keys.
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(call, range(concurrency)))
    samples: list[float] = []
    hits = 0
    lock = threading.Lock()
    start_gate = threading.Barrier(concurrency)

    def work(worker: int) -> None:
        nonlocal hits
        mine: list[float] = []
        cached = 0
        start_gate.wait()
        for _ in range(per_worker):
            start = time.perf_counter()
            cached += call(worker)
            mine.append((time.perf_counter() - start) * 1000)
        with lock:
            samples.extend(mine)
            hits += cached

    threads = [threading.Thread(target=work, args=(w,)) for w in range(concurrency)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return samples, time.perf_counter() - began, hits


async def run_tasks(
    call: Callable[[int], Awaitable[bool]], concurrency: int, per_worker: int
) -> tuple[list[float], float, int]:
    await asyncio.gather(*(call(w) for w in range(concurrency)))

    async def work(worker: int) -> tuple[list[float], int]:
        mine: list[float] = []
        cached = 0
        for _ in range(per_worker):
            start = time.perf_counter()
            cached += await call(worker)
            mine.append((time.perf_counter() - start) * 1000)
        return mine, cached

    began = time.perf_counter()
    results = await asyncio.gather(*(work(w) for w in range(concurrency)))
    wall = time.perf_counter() - began
    return [s for mine, _ in results for s in mine], wall, sum(c for _, c in results)


# -- the callers ---------------------------------------------------------------------------


def raw_kwargs(prompt: str) -> dict[str, Any]:
    """The ``create()`` arguments for the body the gateway sends for ``bench_record``."""
    return {
        "model": RECORD_MODEL,
        "max_tokens": MAX_TOKENS,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": prompt}],
        "extra_body": {"temperature": RECORD_TEMPERATURE},
        "extra_headers": {"anthropic-version": "2023-06-01"},
    }


class Bench:
    def __init__(self, args: argparse.Namespace, base_url: str, work: Path) -> None:
        self.args = args
        self.base_url = base_url
        self.work = work
        self.policy_dir = work / "policies"
        self.databases = iter(range(10_000))

    def database(self, scenario: Scenario, pg: str | None) -> str:
        if scenario.backend == "postgres":
            assert pg is not None
            return pg
        return f"sqlite:///{self.work / f'{scenario.name}-{next(self.databases)}.db'}"

    def gateway_kwargs(self, scenario: Scenario, pg: str | None) -> dict[str, Any]:
        return {
            "policy_dir": self.policy_dir,
            "database_url": self.database(scenario, pg),
            "anthropic_api_key": API_KEY,
            "base_url": self.base_url,
            "durability": scenario.durability,
            "default_caller": "bench",  # requests to Claude name a caller
        }

    def sync_level(self, scenario: Scenario, c: int, pg: str | None) -> Row:
        per_worker = max(1, math.ceil(self.args.calls / c))
        if scenario.task is None:
            client = anthropic.Anthropic(api_key=API_KEY, base_url=self.base_url, max_retries=0)

            def raw(worker: int) -> bool:
                client.messages.create(**raw_kwargs(prompt_for(scenario, worker)))
                return False

            with client:
                self._warm(lambda: raw(0))
                samples, wall, hits = run_threads(raw, c, per_worker)
        else:
            task = scenario.task
            with Gateway(**self.gateway_kwargs(scenario, pg)) as gw:

                def call(worker: int) -> bool:
                    return gw.complete(task, prompt_for(scenario, worker)).cached

                self._warm(lambda: call(0))
                samples, wall, hits = run_threads(call, c, per_worker)
        return make_row(scenario.name, "sync", c, samples, wall, hits)

    def async_level(self, scenario: Scenario, c: int, pg: str | None) -> Row:
        per_worker = max(1, math.ceil(self.args.calls / c))

        async def level() -> tuple[list[float], float, int]:
            if scenario.task is None:
                client = anthropic.AsyncAnthropic(
                    api_key=API_KEY, base_url=self.base_url, max_retries=0
                )

                async def raw(worker: int) -> bool:
                    await client.messages.create(**raw_kwargs(prompt_for(scenario, worker)))
                    return False

                async with client:
                    for _ in range(self.args.warmup):
                        await raw(0)
                    return await run_tasks(raw, c, per_worker)
            task = scenario.task
            async with AsyncGateway(**self.gateway_kwargs(scenario, pg)) as gw:

                async def call(worker: int) -> bool:
                    return (await gw.complete(task, prompt_for(scenario, worker))).cached

                for _ in range(self.args.warmup):
                    await call(0)
                return await run_tasks(call, c, per_worker)

        samples, wall, hits = asyncio.run(level())
        return make_row(scenario.name, "async", c, samples, wall, hits)

    def _warm(self, once: Callable[[], object]) -> None:
        for _ in range(self.args.warmup):
            once()


def scenarios(with_pg: bool) -> list[Scenario]:
    found = [
        Scenario("raw", None),
        Scenario("miss-fsync", "bench_record", "fsync"),
        Scenario("miss-os", "bench_record", "os"),
        Scenario("hit-fsync", "bench_replay", "fsync"),
        Scenario("hit-os", "bench_replay", "os"),
        Scenario("hit-spread-os", "bench_replay", "os", spread=True),
    ]
    if with_pg:
        found += [
            Scenario("miss-pg", "bench_record", "fsync", backend="postgres"),
            Scenario("hit-pg", "bench_replay", "fsync", backend="postgres"),
        ]
    return found


def write_policies(folder: Path) -> None:
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "bench.md").write_text(SYSTEM, encoding="utf-8")
    for task, text in POLICIES.items():
        (folder / f"{task}.toml").write_text(text, encoding="utf-8")


def compare(rows: list[Row]) -> list[Row]:
    """Fill in the p50 added over, and ratio to, the raw call of the same api and level."""
    raw = {(r.api, r.concurrency): r.p50_ms for r in rows if r.scenario == "raw"}
    out = []
    for r in rows:
        base = raw.get((r.api, r.concurrency))
        if base is None or r.scenario == "raw":
            out.append(r)
            continue
        added = round(r.p50_ms - base, 3)
        out.append(
            Row(**{**asdict(r), "added_p50_ms": added, "ratio_p50": round(r.p50_ms / base, 2)})
        )
    return out


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'scenario':<14}{'api':<6}{'c':>3}{'calls':>6}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'mean ms':>9}{'calls/s':>9}{'cached':>7}{'+p50 ms':>9}{'x raw':>7}"
    )
    print(head)
    for r in rows:
        added = "" if r.added_p50_ms is None else f"{r.added_p50_ms:+.3f}"
        ratio = "" if r.ratio_p50 is None else f"{r.ratio_p50:.2f}"
        print(
            f"{r.scenario:<14}{r.api:<6}{r.concurrency:>3}{r.calls:>6}{r.p50_ms:>9.3f}"
            f"{r.p99_ms:>9.3f}{r.mean_ms:>9.3f}{r.calls_per_s:>9.1f}{r.cached:>7.2f}"
            f"{added:>9}{ratio:>7}"
        )


def profile(bench: Bench, name: str, calls: int) -> None:
    """cProfile ``calls`` sync calls at concurrency 1 of one scenario; print where time goes."""
    scenario = next(s for s in scenarios(False) if s.name == name)
    if scenario.task is None:
        client = anthropic.Anthropic(api_key=API_KEY, base_url=bench.base_url, max_retries=0)
        call: Callable[[], object] = lambda: client.messages.create(**raw_kwargs(PROMPT))  # noqa: E731
    else:
        gw = Gateway(**bench.gateway_kwargs(scenario, None))
        task = scenario.task
        call = lambda: gw.complete(task, PROMPT)  # noqa: E731
    for _ in range(max(bench.args.warmup, 1)):
        call()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    stats = pstats.Stats(profiler).strip_dirs()
    print(f"--- {name}: {calls} calls, by cumulative time (ms totals over all calls)")
    stats.sort_stats("cumulative").print_stats(45)
    print(f"--- {name}: by own time")
    stats.sort_stats("tottime").print_stats(25)
    print(f"--- {name}: the gateway's and the audit store's own functions, by cumulative time")
    own = r"(_pipeline|_recording|client|store|_append|_group|chain|canonical|_sdk|anthropic)\.py"
    stats.sort_stats("cumulative").print_stats(own, 40)


def stages(bench: Bench, calls: int) -> None:
    """Time each stage of a sync call at concurrency 1, without a profiler's distortion.

    Reaches into the gateway's private ``_core`` on purpose: only to call the same stages that
    ``Gateway.complete`` calls, in the same order.
    """
    client = anthropic.Anthropic(api_key=API_KEY, base_url=bench.base_url, max_retries=0)
    timings: dict[str, list[float]] = {}

    def timed(label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        value = fn(*args, **kwargs)
        timings.setdefault(label, []).append((time.perf_counter() - start) * 1000)
        return value

    miss = Gateway(**bench.gateway_kwargs(Scenario("stages-miss", "bench_record"), None))
    hit = Gateway(**bench.gateway_kwargs(Scenario("stages-hit", "bench_replay"), None))
    hit.complete("bench_replay", PROMPT)  # the recorded answer every hit serves
    core, hcore = miss._core, hit._core
    for n in range(bench.args.warmup + calls):
        if n == bench.args.warmup:
            timings.clear()
        timed("raw SDK create", client.messages.create, **raw_kwargs(PROMPT))
        timed("miss: complete() total", miss.complete, "bench_record", PROMPT)
        prepared = timed(
            "miss: prepare (policy, plan, key)",
            core.pipeline.prepare, Request("bench_record", prompt=PROMPT),
        )  # fmt: skip
        provider = core.providers.get(prepared.plan.provider)
        wire = timed("miss: wire_bytes", provider.wire_bytes, prepared.plan.body)
        timed("  policy.fingerprint (cached)", getattr, prepared.policy, "fingerprint")
        timed("miss: intent (REQUEST data)", core.records.intent, prepared)
        reply = timed(
            "miss: provider.send",
            provider.send,
            prepared.plan.body,
            api_version=prepared.plan.api_version,
            on_attempt_failed=print,
        )
        timed("miss: record_outcome (RESPONSE)", core.records.record_outcome, prepared, reply, wire)
        timed("hit: complete() total", hit.complete, "bench_replay", PROMPT)
        hp = timed("hit: prepare", hcore.pipeline.prepare, Request("bench_replay", prompt=PROMPT))
        served = timed("hit: store.responses", next, hcore.store.responses(hp.request_hash))
        timed("hit: store.payload", hcore.store.payload, served.payload_digests["response_body"])
        timed("hit: planned (lookup+CACHE_HIT)", hcore.planned, hp)
    miss.close()
    hit.close()
    client.close()
    print(f"sync, concurrency 1, {calls} rounds; ms per stage")
    for label, samples in timings.items():
        row = summarise(samples)
        print(f"{label:<46} p50 {row['p50']:7.3f}  p99 {row['p99']:7.3f}  mean {row['mean']:7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per level")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per level")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--apis", default="sync,async")
    parser.add_argument("--only", help="comma-separated scenario names (raw is always run)")
    parser.add_argument("--pg-url", help="PostgreSQL URL to migrate and use, or 'auto'")
    parser.add_argument("--fake-in-process", action="store_true")
    parser.add_argument("--profile", metavar="SCENARIO", help="cProfile one scenario instead")
    parser.add_argument("--stages", action="store_true", help="time each stage instead")
    parser.add_argument("--json", type=Path, help="also write the rows and machine as JSON")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake()
        return

    configure_logging()
    # JSON rendering stays in the measured path (a service pays it); the output does not.
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives for the run)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=devnull))

    levels = [int(c) for c in args.concurrency.split(",")]
    apis = args.apis.split(",")
    with (
        tempfile.TemporaryDirectory(prefix="gateway-bench-") as tmp,
        fake_api(args.fake_in_process) as base_url,
    ):
        work = Path(tmp)
        write_policies(work / "policies")
        bench = Bench(args, base_url, work)
        if args.profile:
            profile(bench, args.profile, args.calls)
            return
        if args.stages:
            stages(bench, args.calls)
            return
        fsync = probe(work, rounds=100)
        machine = (
            f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}, "
            f"Python {platform.python_version()}, anthropic {anthropic.__version__}"
        )
        print(f"machine: {machine}")
        print(f"fsync (ms): {json.dumps(fsync)}")
        print(f"fake: {'in process' if args.fake_in_process else 'own process'} at {base_url}")
        wanted = None if args.only is None else {"raw", *args.only.split(",")}
        rows: list[Row] = []
        with postgres_url(args.pg_url) as pg:
            for scenario in scenarios(pg is not None):
                if wanted is not None and scenario.name not in wanted:
                    continue
                for api in apis:
                    for c in levels:
                        level = bench.sync_level if api == "sync" else bench.async_level
                        row = level(scenario, c, pg)
                        rows.append(row)
                        print(f"  {json.dumps(asdict(row))}", file=sys.stderr, flush=True)
        rows = compare(rows)
        print_table(rows)
        if args.json:
            args.json.write_text(
                json.dumps(
                    {"machine": machine, "fsync_ms": fsync, "rows": [asdict(r) for r in rows]},
                    indent=2,
                )
            )


if __name__ == "__main__":
    main()
