"""Thread CPU time of the per-request steps the request path used to repeat, in isolation.

    .venv/bin/python bench/stage_cpu_bench.py [--rounds 3000]

Each round runs every step once, in turn (so load drift hits all alike), and reports the
median ``time.thread_time`` per step in microseconds:

- ``wire_bytes``: the SDK request build the REQUEST used to need before the send (the
  wire capture); the send path now records the bytes of the request it builds, so this is
  what a miss no longer pays;
- ``policy content``: ``canonical_bytes(policy.content())``, what each REQUEST cost the
  store (and the pipeline's model dump) before; ``policy_bytes``: the pipeline's lookup now;
- ``prepare (content)`` / ``prepare (bytes)``: the store's off-lock append preparation of a
  REQUEST draft carrying the policy as content, and as canonical bytes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.getcwd())

import structlog

from audit.canonical import canonical_bytes
from audit.store._prepare import prepare
from bench.gateway_bench import API_KEY, PROMPT, fake_api, write_policies
from gateway import Gateway
from gateway.logging import configure_logging
from gateway.request import Request


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3000)
    args = ap.parse_args()
    configure_logging()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=devnull))
    with tempfile.TemporaryDirectory(prefix="gw-stage-") as tmp, fake_api(False) as url:
        work = Path(tmp)
        write_policies(work / "policies")
        gw = Gateway(
            policy_dir=work / "policies",
            database_url=f"sqlite:///{work / 'audit.db'}",
            anthropic_api_key=API_KEY,
            base_url=url,
            durability="os",
        )
        pipeline = gw._core.pipeline
        prepared = pipeline.prepare(Request("bench_record", prompt=PROMPT, caller="bench"))
        provider = gw._core.provider(prepared)
        policy = prepared.policy
        intent = pipeline.records.intent(prepared)
        wire = provider.wire_bytes(prepared.body)
        payloads = {"request_body": wire}
        labels = prepared.labels
        by_content = labels.draft(
            intent.kind, intent.data, payloads=payloads, policy_content=policy.content()
        )
        by_bytes = labels.draft(
            intent.kind,
            intent.data,
            payloads=payloads,
            policy_canonical=pipeline.policy_bytes(policy),
        )
        steps: dict[str, Callable[[], Any]] = {
            "wire_bytes (second SDK build)": lambda: provider.wire_bytes(prepared.body),
            "policy content (model dump + canonical)": lambda: canonical_bytes(policy.content()),
            "policy_bytes (lookup)": lambda: pipeline.policy_bytes(policy),
            "prepare (content)": lambda: prepare(by_content),
            "prepare (bytes)": lambda: prepare(by_bytes),
        }
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(args.rounds):
            for name, step in steps.items():
                t0 = time.thread_time_ns()
                step()
                times[name].append((time.thread_time_ns() - t0) / 1000)
        gw.close()
    print(f"rounds {args.rounds}; policy content {len(pipeline.policy_bytes(policy))} bytes")
    for name, values in times.items():
        print(f"{name:<42} median {statistics.median(values):7.1f} us")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
