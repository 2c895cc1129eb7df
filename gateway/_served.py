"""An in-process memo of recorded answers, so a replay hit need not search the log.

    memo = ServedMemo()
    memo.put(request_hash, Served(seq=12, request_id="req_...", hash="sha256:...", ...))
    served = memo.get(request_hash)       # None when unknown: look in the audit store

Only answers that are already committed to the audit log go in (after their RESPONSE append
returned, or after find_response read them), so serving from the memo never serves anything
the log does not hold; the CACHE_HIT event still names the served seq. The log is append-only,
so a committed answer stays valid. Bounded: the least recently used entries are dropped.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DEFAULT_CAPACITY = 4096


@dataclass(frozen=True)
class Served:
    seq: int
    request_id: str
    hash: str
    stop_reason: str | None
    response: dict[str, Any]  # read-only by convention: results copy what they hand out


class ServedMemo:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, Served] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, request_hash: str) -> Served | None:
        with self._lock:
            served = self._entries.get(request_hash)
            if served is not None:
                self._entries.move_to_end(request_hash)
            return served

    def put(self, request_hash: str, served: Served) -> None:
        with self._lock:
            self._entries[request_hash] = served
            self._entries.move_to_end(request_hash)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
