"""Issue 29's ratios in one run: the raw SDK against the loopback fake vs `gateway serve`.

    $ .venv/bin/python bench/throughput_bench.py                         # SQLite fsync and os
    $ .venv/bin/python bench/throughput_bench.py --pg --workers 1,2 --baseline /tmp/base-thr

One fake upstream (its own process) and, per configuration, one `gateway serve` on its own
fresh database: SQLite ``fsync``, SQLite ``os`` and, with ``--pg``, PostgreSQL on a throwaway
server (tests/support/postgres.py). ``--baseline TREE`` serves every configuration a second
time from another source tree (``git archive main | tar -x -C TREE``): before and after under
the same load. ``--workers 1,2`` runs each served configuration at each worker count.

- c=1: the official SDK's ``messages.create``, every kind once per round in a shuffled order;
  the p50 each served kind adds over the raw call, and as a ratio of the raw call's p50; the
  gateway's CPU per call, over misses and hits alike (``--no-hits``: misses alone);
- replay hit at c=1: the same request again and again to a ``replay`` task (served from the
  log after the first), p50 as a ratio of the raw call's (``--hits-only``: the raw call and
  the hits alone, at c=1, with the gateway's CPU per hit; no misses, no c=32);
- c=32: ``AsyncAnthropic`` with 32 calls in flight, in slices whose order alternates;
  throughput as a ratio of the raw SDK's, and the gateway's CPU (the server process and its
  workers, user + system) per request;
- commit groups: the events appended during the c=32 slices, by commit (an append batch
  shares one ``recorded_at``): the mean and largest group.

Figures are medians of what one run measured; report ``uptime`` beside them (printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from bench.gateway_bench import fake_api  # noqa: E402
from bench.server_bench import (  # noqa: E402
    SERVER_PIDS,
    concurrent,
    gateway_server,
    pct,
    served_env,
)
from bench.stateless_proxy import stateless_proxy  # noqa: E402

TASK = "quant_strategy"  # record mode: every call goes upstream
HIT_TASK = "compliance_review"  # replay mode: a repeated request is served from the log
MODEL = "claude-opus-4-6"
BODY: dict[str, Any] = {
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "Momentum on FX majors"}],
}


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (uvicorn's workers)."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


@dataclass
class Served:
    name: str
    url: str
    db_url: str
    key: str
    model: str = TASK  # the stateless proxy passes the real model id on
    c1: list[float] = field(default_factory=list)
    hit: list[float] = field(default_factory=list)
    c1_cpu: float = 0.0
    c32: list[float] = field(default_factory=list)
    c32_wall: float = 0.0
    c32_cpu: float = 0.0
    groups: list[int] = field(default_factory=list)

    # The run's figures, as both tables give them.
    def c1_p50(self) -> float:
        return statistics.median(self.c1)

    def hit_p50(self) -> float | None:
        return statistics.median(self.hit) if self.hit else None

    def c32_rps(self) -> float:
        return len(self.c32) / self.c32_wall

    def c32_cpu_ms(self) -> float:
        """The gateway's CPU per request at c=32, in milliseconds."""
        return self.c32_cpu * 1000 / len(self.c32)


@contextmanager
def postgres(enabled: bool) -> Iterator[Callable[[], str] | None]:
    if not enabled:
        yield None
        return
    from tests.support.postgres import running_postgres

    with running_postgres() as server:
        yield lambda: server.url(server.create_database())


def commit_groups(db_url: str, since: int, until: int) -> list[int]:
    engine = create_engine(db_url)
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT count(*) FROM events WHERE seq > :a AND seq <= :b GROUP BY recorded_at"),
            {"a": since, "b": until},
        ).all()
    engine.dispose()
    return [int(r[0]) for r in rows]


def head(db_url: str) -> int:
    engine = create_engine(db_url)
    with engine.connect() as conn:
        seq = conn.execute(text("SELECT coalesce(max(seq), 0) FROM events")).scalar_one()
    engine.dispose()
    return int(seq)


def make_home(root: Path, name: str, db_url: str | None, durability: str) -> dict[str, Any]:
    home = root / name
    shutil.copytree(ROOT / "policies", home / "policies")
    return {"home": home, "db_url": db_url or f"sqlite:///{home / 'audit.db'}", "dur": durability}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300, help="c=1 calls per kind")
    parser.add_argument("--c32-calls", type=int, default=1200, help="c=32 calls per kind")
    parser.add_argument("--workers", default="1", help="comma-separated worker counts")
    parser.add_argument("--pg", action="store_true", help="also PostgreSQL (throwaway server)")
    parser.add_argument("--baseline", type=Path, help="also serve from this source tree")
    parser.add_argument("--only", default="", help="comma-separated configs: fsync,os,pg")
    parser.add_argument(
        "--no-hits", action="store_true", help="c=1 misses only (CPU per miss, no hit p50)"
    )
    parser.add_argument(
        "--hits-only", action="store_true", help="c=1 raw calls and replay hits only (no c=32)"
    )
    parser.add_argument(
        "--proxy",
        action="store_true",
        help="also a stateless proxy on the same stack (bench/stateless_proxy.py)",
    )
    args = parser.parse_args()
    trees = [("after", ROOT)] + ([("before", args.baseline)] if args.baseline else [])
    configs = [("sqlite-fsync", "fsync"), ("sqlite-os", "os")] + (
        [("postgres", "fsync")] if args.pg else []
    )
    if args.only:
        wanted = {
            f"sqlite-{o}" if o in ("fsync", "os") else "postgres" for o in args.only.split(",")
        }
        configs = [c for c in configs if c[0] in wanted]
    root = Path(tempfile.mkdtemp(prefix="throughput-bench-"))
    with fake_api(in_process=False) as fake_url, postgres(args.pg) as new_pg, ExitStack() as st:
        from audit.store.migrate import upgrade

        served: list[Served] = []
        for workers in [int(w) for w in args.workers.split(",")]:
            for label, tree in trees:
                for cname, durability in configs:
                    name = f"{cname} w{workers} {label}"
                    pg_url = new_pg() if cname == "postgres" and new_pg else None
                    if pg_url:
                        upgrade(pg_url)
                    h = make_home(root, name.replace(" ", "_"), pg_url, durability)
                    env = served_env(h["home"], fake_url)
                    env["GATEWAY_DATABASE_URL"] = h["db_url"]
                    env["GATEWAY_DURABILITY"] = durability
                    env["GATEWAY_RECORD_KEY"] = "29" * 32  # PostgreSQL needs one configured
                    key = caller_key(env)
                    url = st.enter_context(gateway_server(env, workers, tree))
                    served.append(Served(name, url, h["db_url"], key))
        if args.proxy:
            url = st.enter_context(stateless_proxy(fake_url))
            served.append(Served("stateless proxy", url, "", "sk-bench", model=MODEL))
        run(args, fake_url, served)
    shutil.rmtree(root, ignore_errors=True)


def caller_key(env: dict[str, str]) -> str:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from gateway import Settings
        from gateway.callers import CallerKeys

        with CallerKeys.open(Settings.from_env()) as keys:
            return str(keys.create("bench").key)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run(args: argparse.Namespace, fake_url: str, served: list[Served]) -> None:
    direct = anthropic.Anthropic(base_url=fake_url, api_key="sk-bench", max_retries=0)
    clients = {
        s.name: anthropic.Anthropic(base_url=s.url, api_key=s.key, max_retries=0) for s in served
    }
    raw: list[float] = []
    loads = [os.getloadavg()[0]]

    def timed(call: Callable[[], Any]) -> float:
        t = time.perf_counter()
        call()
        return (time.perf_counter() - t) * 1000

    kinds: list[tuple[str, Callable[[], Any]]] = [
        ("raw", lambda: direct.messages.create(model=MODEL, **BODY))
    ]
    for s in served:
        c = clients[s.name]
        if not args.hits_only:
            kinds.append((s.name, lambda c=c, m=s.model: c.messages.create(model=m, **BODY)))
        if args.no_hits:
            continue
        if s.db_url:
            kinds.append((s.name + " hit", lambda c=c: c.messages.create(model=HIT_TASK, **BODY)))
        else:  # the proxy's memory cache: the same body again is answered from memory
            cached = anthropic.Anthropic(base_url=f"{s.url}/cached", api_key=s.key, max_retries=0)
            kinds.append((s.name + " hit", lambda c=cached: c.messages.create(model=MODEL, **BODY)))
    for _, call in kinds:  # warm-up; records the replay task's answer once
        for _ in range(20):
            call()
    by_name = {s.name: s for s in served}
    cpu0 = {s.name: tree_cpu(SERVER_PIDS[s.url]) for s in served}
    shuffler = random.Random(29)
    order = list(kinds)
    for _ in range(args.calls):
        shuffler.shuffle(order)
        for name, call in order:
            ms = timed(call)
            if name == "raw":
                raw.append(ms)
            elif name.endswith(" hit"):
                by_name[name.removesuffix(" hit")].hit.append(ms)
            else:
                by_name[name].c1.append(ms)
    for s in served:
        # Includes the hit calls (unless --no-hits): the c=1 CPU per call is over both kinds.
        calls = args.calls if args.no_hits or args.hits_only else 2 * args.calls
        s.c1_cpu = (tree_cpu(SERVER_PIDS[s.url]) - cpu0[s.name]) * 1000 / calls
    loads.append(os.getloadavg()[0])
    if args.hits_only:
        report_hits(raw, served, loads)
        return
    raw32: tuple[list[float], float] = asyncio.run(at_32(args, fake_url, served))
    loads.append(os.getloadavg()[0])
    report(args, raw, raw32, served, loads)


async def at_32(
    args: argparse.Namespace, fake_url: str, served: list[Served]
) -> tuple[list[float], float]:
    adirect = anthropic.AsyncAnthropic(base_url=fake_url, api_key="sk-bench", max_retries=0)
    clients = {
        s.name: anthropic.AsyncAnthropic(base_url=s.url, api_key=s.key, max_retries=0)
        for s in served
    }
    kinds: list[tuple[str, Callable[[int], Awaitable[Any]]]] = [
        ("raw", lambda n: adirect.messages.create(model=MODEL, **BODY))
    ]
    for s in served:
        c = clients[s.name]
        kinds.append((s.name, lambda n, c=c, m=s.model: c.messages.create(model=m, **BODY)))
    for _, call in kinds:
        await concurrent(call, 64, 32)  # warm-up: 32 connections each
    raw_ms: list[float] = []
    raw_wall = 0.0
    by_name = {s.name: s for s in served}
    rounds = 4
    for r in range(rounds):
        for name, call in kinds if r % 2 == 0 else list(reversed(kinds)):
            s = by_name.get(name)
            if s is not None:
                cpu0, seq0 = tree_cpu(SERVER_PIDS[s.url]), head(s.db_url) if s.db_url else 0
            ms, wall = await concurrent(call, args.c32_calls // rounds, 32)
            if s is None:
                raw_ms += ms
                raw_wall += wall
                continue
            s.c32_cpu += tree_cpu(SERVER_PIDS[s.url]) - cpu0
            if s.db_url:
                s.groups += commit_groups(s.db_url, seq0, head(s.db_url))
            s.c32 += ms
            s.c32_wall += wall
    for c in [adirect, *clients.values()]:
        await c.close()
    return raw_ms, raw_wall


def report_hits(raw: list[float], served: list[Served], loads: list[float]) -> None:
    raw_p50 = statistics.median(raw)
    print(
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, anthropic "
        f"{anthropic.__version__}; load (1 min) at start / after: "
        + " / ".join(f"{v:.1f}" for v in loads)
    )
    print(f"\nraw SDK → fake: c=1 p50 {raw_p50:.2f} ms\n")
    print("| served | hit p50 ms | hit p90 ms | hit p50 / raw p50 | CPU ms/hit |")
    print("|---|---|---|---|---|")
    for s in served:
        p50 = statistics.median(s.hit)
        print(
            f"| {s.name} | {p50:.2f} | {pct(s.hit, 0.9):.2f} | {p50 / raw_p50:.2f} "
            f"| {s.c1_cpu:.2f} |"
        )


def report(
    args: argparse.Namespace,
    raw: list[float],
    raw32: tuple[list[float], float],
    served: list[Served],
    loads: list[float],
) -> None:
    raw_p50 = statistics.median(raw)
    raw_rps = len(raw32[0]) / raw32[1]
    print(
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, anthropic "
        f"{anthropic.__version__}; load (1 min) at start / after c=1 / after c=32: "
        + " / ".join(f"{v:.1f}" for v in loads)
    )
    print(
        f"\nraw SDK → fake: c=1 p50 {raw_p50:.2f} ms; c=32 {raw_rps:.0f} req/s "
        f"(p50 {statistics.median(raw32[0]):.2f} ms)\n"
    )
    print(
        "| served | c=1 p50 ms | added p50 ms | added / raw p50 | hit p50 / raw p50 "
        "| c=32 req/s | / raw | c=32 p50 ms | CPU ms/req c=32 | CPU ms/req c=1 "
        "| commit group mean / max |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in served:
        p50, rps, hit_p50 = s.c1_p50(), s.c32_rps(), s.hit_p50()
        hit = f"{hit_p50 / raw_p50:.2f}" if hit_p50 is not None else "—"
        groups = f"{statistics.fmean(s.groups):.1f} / {max(s.groups)}" if s.groups else "—"
        print(
            f"| {s.name} | {p50:.2f} | +{p50 - raw_p50:.2f} | {(p50 - raw_p50) / raw_p50:.2f} "
            f"| {hit} | {rps:.0f} | {rps / raw_rps:.2f} "
            f"| {statistics.median(s.c32):.2f} (p99 {pct(s.c32, 0.99):.1f}) "
            f"| {s.c32_cpu_ms():.2f} | {s.c1_cpu:.2f} | {groups} |"
        )
    proxy = next((s for s in served if not s.db_url), None)
    if proxy is not None:
        report_against_proxy(raw_p50, proxy, [s for s in served if s.db_url])


def report_against_proxy(raw_p50: float, proxy: Served, served: list[Served]) -> None:
    """Each served configuration against the stateless proxy of the same run: what the
    gateway's own work (policy, key, record, log) adds over two bare HTTP legs."""
    proxy_p50, proxy_rps, proxy_cpu = proxy.c1_p50(), proxy.c32_rps(), proxy.c32_cpu_ms()
    print(
        f"\nstateless proxy: adds {proxy_p50 - raw_p50:.2f} ms at c=1 "
        f"({(proxy_p50 - raw_p50) / raw_p50:.2f} of the raw p50), {proxy_rps:.0f} req/s at "
        f"c=32, {proxy_cpu:.2f} ms CPU per request\n"
    )
    proxy_hit = proxy.hit_p50()
    if proxy_hit is not None:
        print(f"its memory cache hit: p50 {proxy_hit:.2f} ms ({proxy_hit / raw_p50:.2f} of raw)\n")
    print(
        "| served | added p50 over the proxy's ms | hit p50 / proxy's hit p50 "
        "| c=32 req/s / proxy's | CPU / proxy's |"
    )
    print("|---|---|---|---|---|")
    for s in served:
        hit_p50 = s.hit_p50()
        hit = f"{hit_p50 / proxy_hit:.2f}" if hit_p50 is not None and proxy_hit else "—"
        print(
            f"| {s.name} | +{s.c1_p50() - proxy_p50:.2f} | {hit} "
            f"| {s.c32_rps() / proxy_rps:.2f} | {s.c32_cpu_ms() / proxy_cpu:.2f} |"
        )


if __name__ == "__main__":
    main()
