"""An in-process memo of recorded answers, so a replay hit need not search the log.

    memo = ServedMemo()
    memo.put(request_hash, Served(seq=12, request_id="req_...", hash="sha256:...", ...))
    served = memo.get(request_hash)       # None when unknown: look in the audit store

Only answers that are already committed to the audit log go in (after their RESPONSE append
returned, or after find_response read them), so serving from the memo never serves anything
the log does not hold; the CACHE_HIT event still names the served seq. The log is append-only,
so a committed answer stays valid. Bounded in entries and in bytes of recorded answers: the
least recently used entries are dropped first.

Recorded answers are read by :func:`recorded_message`, whichever way they were delivered: a
RESPONSE body is the message as JSON (a streamed answer is recorded assembled), and a body
recorded as the raw event stream is assembled from its events.

Within one process the memo keeps serving the answer it first saw for a request hash; an
answer another instance records later for the same hash (only possible under a ``record``
policy with an identical request) is served once this entry ages out.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from gateway.providers._stream import MalformedStream, StreamErrorEvent, StreamRelay

DEFAULT_CAPACITY = 4096
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Served:
    seq: int
    request_id: str
    hash: str
    stop_reason: str | None
    response: dict[str, Any]  # read-only by convention: results copy what they hand out
    size: int  # bytes of the recorded response body, for the memo's byte bound


class ServedMemo:
    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[str, Served] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, request_hash: str) -> Served | None:
        with self._lock:
            served = self._entries.get(request_hash)
            if served is not None:
                self._entries.move_to_end(request_hash)
            return served

    def put(self, request_hash: str, served: Served) -> None:
        if served.size > self._max_bytes:
            return  # one answer larger than the whole budget is read from the log each time
        with self._lock:
            old = self._entries.pop(request_hash, None)
            self._bytes -= old.size if old else 0
            self._entries[request_hash] = served
            self._bytes += served.size
            while len(self._entries) > self._capacity or self._bytes > self._max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.size


def recorded_message(raw: bytes) -> dict[str, Any] | None:
    """The message a recorded response body holds, or ``None`` when it holds none.

    A JSON message as itself; a raw event stream (``event: ...`` frames) as the message its
    events add up to, when it reached ``message_stop`` without an error event.
    """
    stripped = raw.lstrip()
    if stripped.startswith((b"event:", b"data:", b":")):
        relay = StreamRelay()
        try:
            relay.feed(raw if raw.endswith(b"\n\n") else raw + b"\n\n")
            return relay.message()
        except (MalformedStream, StreamErrorEvent, KeyError, TypeError, UnicodeDecodeError):
            return None
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
