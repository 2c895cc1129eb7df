"""CPU time of the upstream leg alone: the provider's send, stream, asend and wire capture
against the raw SDK call, alternating, in one process.

    .venv/bin/python bench/upstream_cpu_bench.py [--calls 1000]
    cd /tmp/base && /work/main/.venv/bin/python /work/main/bench/upstream_cpu_bench.py

The provider is imported from the current directory's tree (``AnthropicProvider``'s
constructor is the same in every tree that has one), so the same script measures a baseline
checkout and the working tree; run them interleaved and compare. The fake Messages API runs
in its own process and is not counted. Figures: the calling thread's CPU time per call
(``time.thread_time``), in microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.getcwd())

import anthropic

import gateway
from bench.gateway_bench import API_KEY, PROMPT, fake_api, raw_kwargs
from gateway.providers.anthropic import AnthropicProvider

BODY: dict[str, Any] = {
    k: v for k, v in raw_kwargs(PROMPT).items() if k not in ("extra_body", "extra_headers")
} | raw_kwargs(PROMPT)["extra_body"]


def _ignore(_failure: object) -> None:
    raise AssertionError("the fake answered with a failure")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=50)
    args = ap.parse_args()
    print("gateway from", gateway.__file__, file=sys.stderr)
    with fake_api(False) as url:
        provider = AnthropicProvider(api_key=API_KEY, base_url=url)
        raw = anthropic.Anthropic(api_key=API_KEY, base_url=url, max_retries=0)
        kwargs = raw_kwargs(PROMPT)
        loop = asyncio.new_event_loop()

        def send() -> object:
            return provider.send(BODY, api_version="2023-06-01", on_attempt_failed=_ignore)

        def stream() -> object:
            return list(provider.stream(BODY, api_version="2023-06-01", on_attempt_failed=_ignore))

        def asend() -> object:
            return loop.run_until_complete(
                provider.asend(BODY, api_version="2023-06-01", on_attempt_failed=_ignore)
            )

        steps: dict[str, Callable[[], object]] = {
            "send": send,
            "stream": stream,
            "asend": asend,
            "wire_bytes": lambda: provider.wire_bytes(BODY),
            "raw SDK": lambda: raw.messages.create(**kwargs),
        }
        spent = dict.fromkeys(steps, 0.0)
        for n in range(args.warmup + args.calls):
            for name, step in steps.items():  # each round runs every step: drift hits all
                t0 = time.thread_time()
                step()
                if n >= args.warmup:
                    spent[name] += time.thread_time() - t0
        loop.run_until_complete(provider.aclose())
        loop.close()
        raw.close()
    per = 1e6 / args.calls
    print(
        ", ".join(f"{name} {total * per:.0f}" for name, total in spent.items())
        + f" (us CPU per call); load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
