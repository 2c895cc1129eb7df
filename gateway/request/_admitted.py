"""The memo of admitted requests: a request repeated exactly, under a ``replay`` policy, is
planned and keyed once per process, not once per request.

    memo = AdmittedMemo()
    key, own = memo.key(request)         # None: not memoised (see below)
    prepared = memo.get(key, day)        # the Prepared planned for the same input that day
    memo.put(key, prepared, day)         # planned from ``own``, the input's private copy

A replay hit is an identical request asked again; planning it (the policy's checks, the wire
body, its canonical form, the keyed request hash) gives the same Prepared every time but for
its request id, and was about a fifth of a served hit's time in the gateway's route, on the
event loop (bench/results/throughput.md, "The replay hit"). What decides a plan is fixed for
the life of the gateway (the policies, the catalog, the providers' region, the cache key, the
default caller, the user id salt) but for the day: a policy's effective date and a model's
retirement date are checked against it. So a plan serves only on the day it was made (the
day as the policy set counts it, UTC, and the local day the review rules count): the first
request of a new day is planned again, and refused if its policy or model no longer holds.
Not memoised: a request under a policy transform (an experiment's, offline mode's), and one
to a provider whose model ids do not fix the model (a local model: its version is part of
the key).

The key is the request's fields as JSON bytes, and only a request whose every value is a
plain JSON value of the exact built-in type is memoised (a tuple, a subclass, an enum, NaN, a
mapping that is not a dict: planned every time, as before): the bytes are read back and
compared with the request, so that two requests with one key are one input to the planner.
What is planned is that read-back copy, which no caller holds, so a caller that changes its
messages after the call changes nothing in a later request's plan. Bounded: inputs up to
:data:`MAX_INPUT_BYTES`, at most :data:`CAPACITY` entries and :data:`MAX_BYTES` of inputs,
least recently used dropped first. Each entry also holds its plan (its own copy of the
policy's system prompt and tools), which the byte bound does not count.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import fields, replace
from datetime import date
from typing import Any

import orjson

from gateway.request._prepared import Prepared, Request

__all__ = ["CAPACITY", "MAX_BYTES", "MAX_INPUT_BYTES", "AdmittedMemo"]

CAPACITY = 1024
MAX_INPUT_BYTES = 16 * 1024
MAX_BYTES = 4 * 1024 * 1024  # of keys (the inputs as JSON); the plans hold a copy of each

# The days a plan was made on: the policy set's (UTC) and the review rules' (local).
Day = tuple[date, date]

_EXACT = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
_FIELDS = tuple(field.name for field in fields(Request))


def _refuse(value: object) -> Any:
    raise TypeError(type(value).__name__)


class AdmittedMemo:
    def __init__(self, capacity: int = CAPACITY, max_bytes: int = MAX_BYTES) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[bytes, tuple[Day, Prepared]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(request: Request) -> tuple[bytes, Request] | None:
        """The memo key of ``request`` and its private copy to plan from; None for a request
        that is not memoised (not plain JSON of exact types, or too large)."""
        given = [getattr(request, name) for name in _FIELDS]
        try:  # first: orjson refuses a value that holds itself, or nests past 254 levels
            written = orjson.dumps(given, default=_refuse, option=_EXACT)
        except TypeError:  # orjson.JSONEncodeError is one
            return None
        if len(written) > MAX_INPUT_BYTES or not _exact(given):
            return None
        copy = orjson.loads(written)
        if copy != given:  # a NaN or an infinity, which JSON spells null
            return None
        return written, Request(**dict(zip(_FIELDS, copy, strict=True)))

    def get(self, key: bytes, day: Day) -> Prepared | None:
        """The Prepared planned for ``key`` on ``day``; None if none, or planned another day."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != day:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: bytes, prepared: Prepared, day: Day) -> None:
        with self._lock:
            if self._entries.pop(key, None) is None:
                self._bytes += len(key)
            self._entries[key] = (day, prepared)
            while len(self._entries) > self._capacity or self._bytes > self._max_bytes:
                dropped, _ = self._entries.popitem(last=False)
                self._bytes -= len(dropped)

    @staticmethod
    def again(prepared: Prepared, request_id: str) -> Prepared:
        """The memoised ``prepared`` for a new request: its own id (and so its own labels)."""
        return replace(prepared, request_id=request_id)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _exact(value: object) -> bool:
    """Whether ``value`` is built of dicts (with str keys), lists and scalars of exactly the
    JSON types: a StrEnum or an IntEnum is written, and read back, as its value, so equality
    alone would take it for one. Iterative: a deep input is no RecursionError."""
    pending = [value]
    while pending:
        current = pending.pop()
        if type(current) is dict:
            if not all(type(k) is str for k in current):
                return False
            pending.extend(current.values())
        elif type(current) is list:
            pending.extend(current)
        elif type(current) not in _SCALARS:
            return False
    return True
