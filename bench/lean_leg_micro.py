"""Per-stage CPU of the steps the speed branch changed, this tree against another, in one run.

    $ .venv/bin/python bench/lean_leg_micro.py --baseline /tmp/base --rounds 5

Each round runs every stage in a fresh process per tree (trees alternating), each stage the
minimum over 5 blocks of its per-call ``time.thread_time``; the figure is the median over
rounds, in microseconds. The inputs are bench/clients_bench.py's caller-parts request (30 KB:
caller system prompt and 20 tools) with a ``temperature`` of 0.7, as the plan makes it:

- ``request hash``: ``canonical_digest`` of the request-hash object (provider, version, body);
- ``body parse``: the server's ``parse_json_body`` of the body as the Python SDK sends it;
- ``wire bytes``: ``provider.wire_bytes(body)``, the bytes the upstream leg sends (before: the
  SDK's request build; after: the lean leg's own write, the same bytes);
- ``erasure lookup``: ``erasure_of`` on a fresh SQLite log (the replay memo hit's check);
- ``schema check``: ``check_schema`` of a 10-property output schema, a second time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("request hash", "body parse", "wire bytes", "erasure lookup", "schema check")


def _per_call_us(step: Callable[[], Any], number: int) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        for _ in range(number):
            step()
        best = min(best, (time.thread_time() - started) / number)
    return best * 1e6


def child() -> None:
    from audit import AuditStore
    from audit.canonical import canonical_digest
    from audit.store.erasure import erasure_of
    from bench.clients_bench import QUESTION, SYSTEM, caller_tools
    from gateway.policy._contract import check_schema
    from gateway.providers.anthropic import AnthropicProvider
    from gateway.server._body import parse_json_body

    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "messages": QUESTION,
        "system": SYSTEM,
        "tools": caller_tools(),
        "temperature": 0.7,
    }
    keyed = {"provider": "anthropic", "api_version": "2023-06-01", "body": body}
    provider = AnthropicProvider(api_key="sk-bench", base_url="http://127.0.0.1:9")
    sent = provider.wire_bytes({k: v for k, v in body.items() if k != "temperature"})
    folder = tempfile.mkdtemp(prefix="lean-micro-")
    store = AuditStore.open(f"sqlite:///{folder}/audit.db", "os")
    schema = {
        "type": "object",
        "properties": {f"f{i}": {"type": "string", "description": "x" * 50} for i in range(10)},
        "required": ["f0"],
        "additionalProperties": False,
    }
    check_schema(schema, "the schema")
    steps: dict[str, tuple[Callable[[], Any], int]] = {
        "request hash": (lambda: canonical_digest(keyed), 200),
        "body parse": (lambda: parse_json_body(sent), 200),
        "wire bytes": (lambda: provider.wire_bytes(body), 100),
        "erasure lookup": (lambda: erasure_of(store, "req_none"), 500),
        "schema check": (lambda: check_schema(schema, "the schema"), 20),
    }
    print(json.dumps({name: _per_call_us(step, n) for name, (step, n) in steps.items()}))
    store.close()
    provider.close()


def run(tree: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "lean_leg_micro.py"), "--child"],
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {out.stderr.strip().splitlines()[-1:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        child()
        return
    if args.baseline is None:
        ap.error("--baseline TREE is required")
    trees = {"this tree": ROOT, "baseline": args.baseline}
    found: dict[str, dict[str, list[float]]] = {t: {s: [] for s in STAGES} for t in trees}
    loads = [os.getloadavg()[0]]
    for n in range(args.rounds):
        order = list(trees) if n % 2 == 0 else list(reversed(trees))
        for name in order:
            for stage, us in run(trees[name]).items():
                found[name][stage].append(us)
        loads.append(os.getloadavg()[0])
    print(f"{args.rounds} rounds; load (1 min) {min(loads):.1f}-{max(loads):.1f}\n")
    print("| stage | baseline us | this tree us | ratio |")
    print("|---|---|---|---|")
    for stage in STAGES:
        old = statistics.median(found["baseline"][stage])
        new = statistics.median(found["this tree"][stage])
        print(f"| {stage} | {old:.1f} | {new:.1f} | {new / old:.2f} |")


if __name__ == "__main__":
    main()
