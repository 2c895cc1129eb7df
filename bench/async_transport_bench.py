"""The async upstream call's cost by transport: httpx's own against aiohttp's, interleaved.

    .venv/bin/python bench/async_transport_bench.py --rounds 6 --calls 300

One process, one event loop, the loopback fake in its own process. Two SDK clients built as
the gateway builds its async client (explicit key and base URL, no SDK retries or tracing,
the header strip and wire hooks): ``httpx`` with the SDK's default httpx client, ``aiohttp``
with :func:`gateway.providers.wire._transport.async_http_client` (aiohttp, keepalive probes). Each
round runs ``--calls`` sequential ``messages.with_streaming_response.create`` calls per
client, the body read in full, the order alternating every round; the figure is the calling
thread's CPU time per call (load-independent) and the wall time per call (not: the fake and
the machine's other work share the cores), median over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
import httpx2  # noqa: E402

from bench.gateway_bench import fake_api  # noqa: E402
from gateway.providers.anthropic import FIRST_PARTY, ApiKeyAuth  # noqa: E402
from gateway.providers.wire import _sdk  # noqa: E402
from gateway.providers.wire._announce import aannounce_wire  # noqa: E402
from gateway.providers.wire._transport import AIOHTTP_TRANSPORT, async_http_client  # noqa: E402

BODY: dict[str, Any] = {
    "model": "claude-opus-4-6",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Summarise the quarter's trading book."}],
}
HEADERS = {"anthropic-version": "2023-06-01", "Authorization": "Bearer sk-bench"}


def client(base_url: str, http: Any) -> anthropic.AsyncAnthropic:
    timeout = httpx2.Timeout(60.0, connect=5.0)
    options = _sdk.client_options(
        FIRST_PARTY, ApiKeyAuth("sk-bench"), base_url=base_url, timeout=timeout
    )
    return anthropic.AsyncAnthropic(**options, http_client=http)


async def calls(sdk: anthropic.AsyncAnthropic, n: int) -> tuple[float, float]:
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(n):
        async with sdk.messages.with_streaming_response.create(
            **BODY, extra_headers=HEADERS
        ) as raw:
            await raw.http_response.aread()
    return (time.thread_time() - cpu) / n * 1e6, (time.perf_counter() - wall) / n * 1e6


async def run(base_url: str, rounds: int, n: int) -> dict[str, list[tuple[float, float]]]:
    _, astrip = _sdk.header_strippers(FIRST_PARTY)
    hooks = {"request": [astrip, aannounce_wire]}
    clients = {
        "httpx": client(base_url, anthropic.DefaultAsyncHttpxClient(event_hooks=hooks)),
        "aiohttp": client(base_url, async_http_client(hooks)),
    }
    for sdk in clients.values():
        await calls(sdk, 50)  # warm: connection, caches
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    for r in range(rounds):
        order = list(clients) if r % 2 == 0 else list(reversed(clients))
        for name in order:
            results[name].append(await calls(clients[name], n))
    for sdk in clients.values():
        await sdk.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300, help="calls per client per round")
    args = parser.parse_args()
    if AIOHTTP_TRANSPORT is None:
        sys.exit("aiohttp is not installed: pip install -e . installs the SDK's aiohttp extra")
    load = [os.getloadavg()[0]]
    with fake_api(in_process=False) as base_url:
        results = asyncio.run(run(base_url, args.rounds, args.calls))
    load.append(os.getloadavg()[0])
    print(f"{args.rounds} rounds x {args.calls} calls, load {load[0]:.1f} -> {load[1]:.1f}\n")
    print("| transport | CPU µs/call, median (rounds) | wall µs/call, median |")
    print("|---|---|---|")
    for name, rows in results.items():
        cpus = ", ".join(f"{c:.0f}" for c, _ in rows)
        print(
            f"| {name} | **{statistics.median(c for c, _ in rows):.0f}** ({cpus}) "
            f"| {statistics.median(w for _, w in rows):.0f} |"
        )
    ratio = statistics.median(c for c, _ in results["aiohttp"]) / statistics.median(
        c for c, _ in results["httpx"]
    )
    print(f"\naiohttp / httpx CPU per call: {ratio:.2f}")


if __name__ == "__main__":
    main()
