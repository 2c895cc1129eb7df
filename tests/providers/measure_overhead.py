"""Measures the provider against the raw SDK on the loopback fake (not collected by pytest).

.venv/bin/python -m tests.providers.measure_overhead
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, cast

from gateway.providers.anthropic import AnthropicProvider
from tests.fakes.messages_api import FakeMessagesAPI

BODY = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "x " * 500}],
    "temperature": 0.0,
}
RUNS = 300


def timed(label: str, fn: Callable[[], object]) -> None:
    for _ in range(20):  # warm connections and caches
        fn()
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    p99 = samples[int(RUNS * 0.99) - 1]
    print(f"{label:<18} p50 {statistics.median(samples):.3f} ms  p99 {p99:.3f} ms")


def main() -> None:
    with FakeMessagesAPI() as fake:
        provider = AnthropicProvider(api_key="measure-key", base_url=fake.base_url)
        raw = provider._client  # the same explicitly built SDK client, called directly
        timed("wire_bytes", lambda: provider.wire_bytes(BODY))
        timed(
            "provider.send",
            lambda: provider.send(BODY, api_version="2023-06-01", on_attempt_failed=print),
        )
        timed(
            "raw SDK create",
            lambda: cast(Any, raw.messages).create(
                max_tokens=256,
                model="claude-sonnet-4-6",
                messages=BODY["messages"],
                extra_body={"temperature": 0.0},
                extra_headers={"anthropic-version": "2023-06-01"},
            ),
        )
        provider.close()


if __name__ == "__main__":
    main()
