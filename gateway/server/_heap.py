"""The served process's garbage collector, set for a server's allocation pattern.

    settle_heap()        # once the app is built: in `gateway serve`, in each worker process

A request allocates a few thousand short-lived objects (headers, models, dicts), and with
Python's default thresholds (700, 10, 10) the collector ran every few requests, and a full
collection walked every object the imports made (SQLAlchemy, pydantic, the SDK): 13 % of a
served request's CPU at c=32 in the profile of bench/results/throughput.md. So the objects
alive once the app is built are frozen (``gc.freeze``: never walked again, never freed), and
the youngest generation is collected every GEN0_THRESHOLD allocations, not 700: the garbage
of a request is mostly freed by reference counting anyway; cycles wait a little longer.

Only `gateway serve` does this (a library never changes its host's collector).
"""

from __future__ import annotations

import gc

__all__ = ["GEN0_THRESHOLD", "settle_heap"]

GEN0_THRESHOLD = 10_000
OLDER_THRESHOLD = 20  # each older generation after this many collections of the one below


def settle_heap() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
