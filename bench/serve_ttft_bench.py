"""Issue 29's time to first token: a stream through `gateway serve` against the raw SDK.

    $ .venv/bin/python bench/serve_ttft_bench.py [--calls 200] [--baseline /tmp/base-tree] [--plain]

One fake upstream (its own process); per configuration (SQLite ``fsync`` and ``os``, and each
again from ``--baseline``'s tree) one `gateway serve` on its own fresh database; the official
SDK as the client, ``messages.create(stream=True)``, one call at a time, every kind once per
round in a shuffled order. Time to first token: from the call to the first
``content_block_delta`` in the client's hands. The table gives each p50, what serving added
and that as a ratio of the raw time to first token (the issue's target: at most 0.5).
``--proxy`` adds the stateless proxy on the same stack (bench/stateless_proxy.py), the floor
of any Python proxy's time to first token. ``--plain`` adds a whole non-streamed answer per
kind to the same shuffled rounds, so that what a stream adds before its first delta is
compared with what a plain answer adds, at the same load.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402

from bench.gateway_bench import fake_api  # noqa: E402
from bench.server_bench import gateway_server, served_env  # noqa: E402
from bench.stateless_proxy import stateless_proxy  # noqa: E402
from bench.throughput_bench import BODY, MODEL, TASK, caller_key  # noqa: E402


def first_token_ms(client: anthropic.Anthropic, model: str) -> float:
    started = time.perf_counter()
    first = None
    with client.messages.create(model=model, stream=True, **BODY) as stream:
        for event in stream:
            if first is None and event.type == "content_block_delta":
                first = (time.perf_counter() - started) * 1000
    assert first is not None, "the stream had no delta"
    return first


def answer_ms(client: anthropic.Anthropic, model: str) -> float:
    started = time.perf_counter()
    client.messages.create(model=model, **BODY)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200, help="streams per kind")
    parser.add_argument("--baseline", type=Path, help="also serve from this source tree")
    parser.add_argument("--plain", action="store_true", help="also a whole non-streamed answer")
    parser.add_argument(
        "--proxy", action="store_true", help="also the stateless proxy (bench/stateless_proxy.py)"
    )
    args = parser.parse_args()
    trees = [("after", ROOT)] + ([("before", args.baseline)] if args.baseline else [])
    root = Path(tempfile.mkdtemp(prefix="ttft-bench-"))
    loads = [os.getloadavg()[0]]
    with fake_api(in_process=False) as fake_url, ExitStack() as stack:
        kinds: list[tuple[str, Callable[[], float]]] = []
        direct = anthropic.Anthropic(base_url=fake_url, api_key="sk-bench", max_retries=0)
        kinds.append(("raw", lambda: first_token_ms(direct, MODEL)))
        if args.plain:
            kinds.append(("raw plain", lambda: answer_ms(direct, MODEL)))
        for label, tree in trees:
            for durability in ("fsync", "os"):
                name = f"SQLite {durability}, {label}"
                home = root / name.replace(" ", "_").replace(",", "")
                shutil.copytree(ROOT / "policies", home / "policies")
                env = served_env(home, fake_url)
                env["GATEWAY_DURABILITY"] = durability
                key = caller_key(env)
                url = stack.enter_context(gateway_server(env, 1, tree))
                client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
                kinds.append((name, lambda c=client: first_token_ms(c, TASK)))
                if args.plain:
                    kinds.append((f"{name} plain", lambda c=client: answer_ms(c, TASK)))
        if args.proxy:
            url = stack.enter_context(stateless_proxy(fake_url))
            proxied = anthropic.Anthropic(base_url=url, api_key="sk-bench", max_retries=0)
            kinds.append(("stateless proxy", lambda: first_token_ms(proxied, MODEL)))
            if args.plain:
                kinds.append(("stateless proxy plain", lambda: answer_ms(proxied, MODEL)))
        for _, call in kinds:  # warm-up
            for _ in range(10):
                call()
        ms: dict[str, list[float]] = {name: [] for name, _ in kinds}
        order = list(kinds)
        shuffler = random.Random(29)
        for _ in range(args.calls):
            shuffler.shuffle(order)
            for name, call in order:
                ms[name].append(call())
        loads.append(os.getloadavg()[0])
    shutil.rmtree(root, ignore_errors=True)
    raw = statistics.median(ms["raw"])
    print(f"load (1 min) at start / end: {loads[0]:.1f} / {loads[1]:.1f}; {args.calls} each")
    print(f"\nraw SDK → fake: time to first token p50 {raw:.2f} ms\n")
    print("| served | TTFT p50 ms | added ms | added / raw TTFT |\n|---|---|---|---|")
    for name, values in ms.items():
        if name.startswith("raw") or name.endswith(" plain"):
            continue
        p50 = statistics.median(values)
        print(f"| {name} | {p50:.2f} | +{p50 - raw:.2f} | {(p50 - raw) / raw:.2f} |")
    if args.plain:
        plain = statistics.median(ms["raw plain"])
        print(f"\nraw SDK → fake: whole plain answer p50 {plain:.2f} ms\n")
        print("| served | stream: TTFT added ms | plain: answer added ms |\n|---|---|---|")
        for name, values in ms.items():
            if name.endswith(" plain") and name != "raw plain":
                stream = statistics.median(ms[name.removesuffix(" plain")]) - raw
                added = statistics.median(values) - plain
                print(f"| {name.removesuffix(' plain')} | +{stream:.2f} | +{added:.2f} |")


if __name__ == "__main__":
    main()
