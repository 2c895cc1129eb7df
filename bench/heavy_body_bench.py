"""One caller's heavy request bodies against another caller's latency, on `gateway serve`.

    $ .venv/bin/python bench/heavy_body_bench.py                 # about a minute
    $ .venv/bin/python bench/heavy_body_bench.py --baseline TREE  # and a tree before a change

A light caller asks a replayed question (a cache hit: no upstream call) one request at a
time; meanwhile ``--heavy`` threads each send, back to back, a body of about 7 MiB of JSON
(150,000 small text blocks, the shape that costs a parser most per byte) naming a task
that does not exist, so that the server's work on it is reading and parsing the body. The
figure is the light caller's p50 and p99 alone and under the heavy load, per server tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx2 as httpx  # noqa: E402

from bench.gateway_bench import fake_api  # noqa: E402
from bench.server_bench import gateway_server, served_env  # noqa: E402

LIGHT = {
    "model": "compliance_review",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "Transaction: 7 EUR to ACME"}],
}


def heavy_body(blocks: int) -> bytes:
    content = [{"type": "text", "text": "a"} for _ in range(blocks)]
    body = {
        "model": "no_such_task",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": content}],
    }
    return json.dumps(body).encode()


def light_latencies(url: str, key: str, calls: int) -> list[float]:
    out = []
    with httpx.Client(timeout=60) as client:
        for _ in range(calls):
            started = time.perf_counter()
            answer = client.post(f"{url}/v1/messages", json=LIGHT, headers={"x-api-key": key})
            out.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200, answer.text
    return out


def heavy_load(url: str, key: str, body: bytes, stop: threading.Event, sent: list[int]) -> None:
    with httpx.Client(timeout=120) as client:
        while not stop.is_set():
            answer = client.post(
                f"{url}/v1/messages",
                content=body,
                headers={"x-api-key": key, "content-type": "application/json"},
            )
            assert answer.status_code in (400, 404, 413), answer.status_code
            sent.append(1)


def measure(url: str, key: str, body: bytes, calls: int, heavy: int) -> str:
    light_latencies(url, key, 5)  # warm: the first records, the rest are hits
    alone = light_latencies(url, key, calls)
    stop = threading.Event()
    sent: list[int] = []
    threads = [
        threading.Thread(target=heavy_load, args=(url, key, body, stop, sent)) for _ in range(heavy)
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    loaded = light_latencies(url, key, calls)
    stop.set()
    for thread in threads:
        thread.join()
    q = statistics.quantiles
    return (
        f"alone p50 {statistics.median(alone):.1f} ms p99 {q(alone, n=100)[98]:.1f} ms; "
        f"under {heavy} heavy senders ({len(sent)} heavy bodies) p50 "
        f"{statistics.median(loaded):.1f} ms p99 {q(loaded, n=100)[98]:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--heavy", type=int, default=2, help="threads sending heavy bodies")
    parser.add_argument("--blocks", type=int, default=150_000)
    parser.add_argument("--baseline", type=Path, help="also this source tree (before/after)")
    args = parser.parse_args()
    body = heavy_body(args.blocks)
    print(f"heavy body: {len(body):,} bytes")
    home = Path(tempfile.mkdtemp(prefix="heavy-body-bench-"))
    shutil.copytree(ROOT / "policies", home / "policies")
    with fake_api(in_process=False) as fake_url:
        env = served_env(home, fake_url)
        os.environ.update(env)
        from gateway import Settings
        from gateway.callers import CallerKeys

        with CallerKeys.open(Settings.from_env()) as keys:
            key = keys.create("bench").key
        trees = [("this tree", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
        for name, tree in trees:
            with gateway_server(env, 1, tree) as url:
                print(f"{name}: {measure(url, key, body, args.calls, args.heavy)}")


if __name__ == "__main__":
    main()
