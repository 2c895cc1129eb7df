"""Streaming overhead: time to first token and per-delta cost through the gateway vs the raw
SDK's ``messages.stream``, on the same loopback fake, in the same run.

    .venv/bin/python bench/streaming_bench.py [--runs 200] [--deltas 200]

Both sides read the same scripted stream (one event per HTTP chunk) from the same fake. Time
to first token is measured from the call to the first ``content_block_delta`` in the caller's
hands; through the gateway that includes resolving the policy, planning, capturing the wire
bytes and committing the REQUEST intent (SQLite, durability "os"). Per-delta cost is
(last delta - first delta) / (deltas - 1) on a stream of many deltas sent back to back.

Pass-through: on a stream whose deltas the fake sends ``--pace-ms`` apart, the spread from the
first delta to the last in the caller's hands, through the gateway as a ratio to the raw SDK's
(1.0: each delta is handed on as it arrives; near 0: the stream was held back and released at
the end). The test suite checks the ordering itself (tests/streaming/test_stream.py); this
measures the timing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anthropic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway import Gateway, Settings
from tests.fakes.messages_api import FakeMessagesAPI, Reply

POLICY = """\
schema = 1
description = "Streaming benchmark."
owner = "bench"

[model]
id = "claude-opus-5-5"

[generation]
max_tokens = 1024

[cache]
mode = "record"
"""
PROMPT = "Summarise the exposure of desk 7 to EUR rates."
PACED_TEXT = "alpha bravo charlie delta echo foxtrot golf hotel"


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _raw(client: anthropic.Anthropic) -> tuple[float, list[float]]:
    started = time.perf_counter()
    first, stamps = None, []
    with client.messages.stream(
        model="claude-opus-5-5",
        max_tokens=1024,
        messages=[{"role": "user", "content": PROMPT}],
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                now = time.perf_counter()
                first = first or now
                stamps.append(now)
    assert first is not None
    return first - started, stamps


def _gateway(gw: Gateway) -> tuple[float, list[float]]:
    started = time.perf_counter()
    first, stamps = None, []
    with gw.stream("bench_stream", PROMPT) as s:
        for event in s:
            if event["type"] == "content_block_delta":
                now = time.perf_counter()
                first = first or now
                stamps.append(now)
    assert first is not None
    return first - started, stamps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--pace-ms", type=float, default=20.0)
    parser.add_argument("--paced-runs", type=int, default=20)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="stream-bench-"))
    (folder / "policies").mkdir()
    (folder / "policies" / "bench_stream.toml").write_text(POLICY)
    words = " ".join(f"w{i}" for i in range(args.deltas))
    with FakeMessagesAPI() as fake:
        fake.set_default(lambda _r: Reply.stream(words, deltas=args.deltas))
        settings = Settings(
            policy_dir=folder / "policies",
            database_url=f"sqlite:///{folder / 'audit.db'}",
            anthropic_api_key="sk-ant-bench",
            anthropic_base_url=fake.base_url,
            durability="os",
            default_caller="bench",
        )
        client = anthropic.Anthropic(api_key="sk-ant-bench", base_url=fake.base_url, max_retries=0)
        with Gateway(settings) as gw:
            for _ in range(10):  # warm both paths (connections, imports, caches)
                _raw(client)
                _gateway(gw)
            raw_ttft, gw_ttft, raw_delta, gw_delta = [], [], [], []
            for _ in range(args.runs):  # interleaved, so drift affects both alike
                for side, ttft, per in ((_raw, raw_ttft, raw_delta), (_gateway, gw_ttft, gw_delta)):
                    first, stamps = side(client if side is _raw else gw)  # type: ignore[arg-type]
                    ttft.append(first * 1000)
                    per.append((stamps[-1] - stamps[0]) / (len(stamps) - 1) * 1e6)
            paced = Reply.stream(PACED_TEXT, deltas=8, delay=args.pace_ms / 1000)
            raw_spread, gw_spread = [], []
            for _ in range(args.paced_runs):
                for side, spread in ((_raw, raw_spread), (_gateway, gw_spread)):
                    fake.script(paced)
                    _first, stamps = side(client if side is _raw else gw)  # type: ignore[arg-type]
                    spread.append((stamps[-1] - stamps[0]) * 1000)
        client.close()
    shutil.rmtree(folder, ignore_errors=True)
    rows = [
        ("time to first token, ms", raw_ttft, gw_ttft),
        ("per delta, µs", raw_delta, gw_delta),
    ]
    print(f"runs={args.runs} deltas per stream={args.deltas}")
    print("| measure | raw SDK p50 | gateway p50 | added p50 | raw p95 | gateway p95 |")
    print("|---|---|---|---|---|---|")
    for name, raw, ours in rows:
        added = statistics.median(ours) - statistics.median(raw)
        print(
            f"| {name} | {statistics.median(raw):.3f} | {statistics.median(ours):.3f} | "
            f"{added:+.3f} | {_p(raw, 0.95):.3f} | {_p(ours, 0.95):.3f} |"
        )
    ratio = statistics.median(gw_spread) / statistics.median(raw_spread)
    print(
        f"\ndeltas sent {args.pace_ms:g} ms apart (8 per stream, {args.paced_runs} runs): "
        f"first-to-last spread p50 raw SDK {statistics.median(raw_spread):.1f} ms, gateway "
        f"{statistics.median(gw_spread):.1f} ms, ratio {ratio:.2f} (1.0: passed on as sent)"
    )


if __name__ == "__main__":
    main()
