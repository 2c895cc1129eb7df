"""The replay cache: which recorded answer may be served (:meth:`ReplayCache.serve`, the one
serving rule), the in-process memo of answers that passed it, and the lookup.

    cache = ReplayCache(recorder)
    served = cache.lookup(prepared)                  # None: a miss (or not a replay request)
    cache.offer(prepared, Answered(seq, hash, data, response, size))  # a RESPONSE just committed

Both sides go through :meth:`ReplayCache.serve`: the memo takes only answers the rule lets
through, and the lookup asks the audit store for candidates (:meth:`AuditStore.responses`,
newest first, which knows nothing of what the gateway serves) and serves the newest that the
rule lets through among the newest :data:`MAX_CANDIDATES`. A candidate from the log is
authenticated before it is read (invariant 8); one this process just committed is the bytes
it hashed.

Only answers committed to the audit log go in the memo, so serving from it never serves
anything the log does not hold; the CACHE_HIT event still names the served seq. The log is
append-only, so a committed answer stays valid. Bounded in entries and in bytes of recorded
answers: the least recently used entries are dropped first. Within one process the memo keeps
serving the answer it first saw for a request hash; an answer another instance records later
for the same hash (only possible under a ``record`` policy with an identical request) is
served once this entry ages out.

Recorded answers are read by :func:`recorded_message`, whichever way they were delivered: a
RESPONSE body is the message as JSON (a streamed answer is recorded assembled), and a body
recorded as the raw event stream is assembled from its events.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from audit import EventKind, StoredEvent
from audit.errors import AuditStoreError
from audit.store.erasure import erasure_of
from audit.verify.authenticity import check_event, check_outcome
from gateway.errors import AuditWriteError, IntegrityAlert
from gateway.providers.stream import MalformedStream, StreamErrorEvent, StreamRelay
from gateway.request._prepared import Prepared
from gateway.request._recording import Recorder
from gateway.request._replayable import outside_world

__all__ = ["Answered", "ReplayCache", "Served", "ServedMemo"]

DEFAULT_CAPACITY = 4096
# Recorded answers of one request hash that a lookup reads, newest first, before it is a
# miss. Each is authenticated before it is judged, so the bound keeps a request whose answers
# keep failing their output check from costing a read and a signature check per failed
# answer on the record (20,000 of them took seconds a lookup). Past it the request goes
# upstream and records anew, as a request with no answer on the record does.
MAX_CANDIDATES = 16
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Served:
    seq: int
    request_id: str
    hash: str
    stop_reason: str | None
    response: dict[str, Any]  # read-only by convention: results copy what they hand out
    size: int  # bytes of the recorded response body, for the memo's byte bound
    # The served RESPONSE's request hash when read from the log: a plain one (recorded
    # before keyed hashes) is what the CACHE_HIT must carry to name it.
    request_hash: str | None = None


@dataclass(frozen=True)
class Answered:
    """A RESPONSE this process has just committed: its seq and hash, its data, the message."""

    request_id: str
    seq: int
    hash: str
    data: Mapping[str, Any]
    response: dict[str, Any]
    size: int  # bytes of the response body as recorded


def replays(prepared: Prepared) -> bool:
    """Whether a request may be served a recorded answer at all: under a ``replay`` policy,
    and not one whose answers depend on the outside world (_replayable)."""
    return prepared.plan.cache_mode == "replay" and outside_world(prepared.policy) is None


def answer_alerted(data: Mapping[str, Any]) -> bool:
    """Whether a RESPONSE's data says its answer broke its policy's pins (another model, another
    region, server-side edits: _answer_checks). Such an answer was returned once, with
    its alert; serving it again as a replay hit would repeat, without a fresh alert, an answer
    the policy did not allow, so an identical request goes upstream again (docs/gateway.md).
    Read from the RESPONSE itself, which commits its alerts with the answer."""
    return bool(data.get("alerts"))


class ReplayCache:
    """The replay cache of one gateway: the rule, the memo, the lookup (module docstring)."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._memo = ServedMemo()

    def serve(self, prepared: Prepared, answer: Answered | StoredEvent) -> Served | None:
        """The serving rule: the answer to serve for ``prepared``, or None when this one may
        not be. It may when the request replays (:func:`replays`) and the answer passed its
        output check (``ok``), raised no alert (:func:`answer_alerted`) and answers the bytes
        that were sent (``sent_as_recorded``); a recorded one must also authenticate, before
        any of that is read from it, and be a readable message, or the request fails closed
        (IntegrityAlert, AuditWriteError)."""
        if not replays(prepared):
            return None
        if isinstance(answer, StoredEvent):
            if self._erased(prepared, answer.request_id):
                return None  # its content was erased by policy: never served, a miss
            # Authenticated before anything in it is read (invariant 12): what a candidate
            # says of itself (ok, alerts, sent as recorded) may decide that it is skipped only
            # once it is known to be the gateway's own record. A tampered one fails closed.
            self._authenticate(prepared, answer)
        data = answer.data
        if (
            data.get("ok") is not True
            or answer_alerted(data)
            or data.get("sent_as_recorded") is False
        ):
            return None
        match answer:
            case Answered():
                # Committed by this process a moment ago: the bytes it hashed, the message parsed.
                return Served(
                    seq=answer.seq,
                    request_id=answer.request_id,
                    hash=answer.hash,
                    stop_reason=data.get("stop_reason"),
                    response=answer.response,
                    size=answer.size,
                )
            case StoredEvent():
                return self._read(prepared, answer)

    def offer(self, prepared: Prepared, answer: Answered) -> None:
        """The write side: remember a RESPONSE just committed, if the rule would serve it."""
        served = self.serve(prepared, answer)
        if served is not None:
            self._memo.put(prepared.request_hash, served)

    def lookup(self, prepared: Prepared) -> Served | None:
        """The read side: the answer to serve for ``prepared`` (from the memo, else the newest
        of the newest :data:`MAX_CANDIDATES` candidates in the log that the rule lets
        through), or None on a miss."""
        if not replays(prepared):
            return None
        served = self._memo.get(prepared.request_hash)
        if served is not None:
            # The memo outlives an erasure another process records: asked of the log (one
            # indexed lookup) before each memo hit.
            if not self._erased(prepared, served.request_id):
                return served
            self._memo.drop(prepared.request_hash)
        try:
            # Answers recorded before keyed request hashes are found under the plain one.
            plain = prepared.plain_hash
            also = (plain,) if plain is not None and plain != prepared.request_hash else ()
            candidates = self._recorder.store.responses(prepared.request_hash, *also)
            for candidate in islice(candidates, MAX_CANDIDATES):
                served = self.serve(prepared, candidate)
                if served is not None:
                    self._memo.put(prepared.request_hash, served)
                    return served
        except AuditStoreError as exc:
            raise AuditWriteError(
                f"the audit database could not be searched for a recorded answer: {exc}",
                request_id=prepared.request_id,
            ) from exc
        return None

    def _erased(self, prepared: Prepared, request_id: str) -> bool:
        """Whether the content of ``request_id`` was erased (audit.store.erasure). The
        erasure event is authenticated before it decides anything (invariant 12): one that
        does not check out is an integrity alert, and nothing is served."""
        recorder = self._recorder
        try:
            erasure = erasure_of(recorder.store, request_id)
        except AuditStoreError as exc:
            raise AuditWriteError(
                f"the audit database could not be searched for an erasure: {exc}",
                request_id=prepared.request_id,
            ) from exc
        if erasure is None:
            return False
        problems = check_event(recorder.store, erasure, recorder.signature)
        if problems:
            recorder.append(
                prepared.labels.draft(
                    EventKind.INTEGRITY_ALERT,
                    {"served_seq": erasure.seq, "check": "erasure", "problems": problems},
                )
            )
            raise IntegrityAlert(
                f"the erasure event at seq {erasure.seq} did not check out ({problems[0]}), "
                "so the answer it names was not served.",
                problems=tuple(problems),
                request_id=prepared.request_id,
            )
        return True

    def _authenticate(self, prepared: Prepared, event: StoredEvent) -> None:
        """Invariant 8: an answer that does not check out is never served; an INTEGRITY_ALERT
        event is recorded for this request (what failed, which seq) and IntegrityAlert raised."""
        recorder = self._recorder
        problems = check_outcome(recorder.store, event, signature=recorder.signature)
        if not problems:
            return
        recorder.append(
            prepared.labels.draft(
                EventKind.INTEGRITY_ALERT,
                {"served_seq": event.seq, "check": "served_answer", "problems": problems},
            )
        )
        raise IntegrityAlert(
            f"the recorded answer at seq {event.seq} did not check out ({problems[0]}), "
            "so it was not served.",
            problems=tuple(problems),
            request_id=prepared.request_id,
        )

    def _read(self, prepared: Prepared, event: StoredEvent) -> Served:
        try:
            raw = self._recorder.store.payload(event.payload_digests["response_body"])
        except (AuditStoreError, KeyError) as exc:
            raise AuditWriteError(
                f"the recorded response_body of seq {event.seq} could not be read.",
                request_id=prepared.request_id,
                hint="Run 'gateway audit verify'.",
            ) from exc
        response = recorded_message(raw)
        if response is None:
            raise AuditWriteError(
                f"the recorded answer at seq {event.seq} is not a readable message, so it was "
                "not served.",
                request_id=prepared.request_id,
                hint="Run 'gateway audit verify'.",
            )
        return Served(
            seq=event.seq,
            request_id=event.request_id,
            hash=event.hash,
            stop_reason=event.data.get("stop_reason"),
            response=response,
            size=len(raw),
            request_hash=event.request_hash,
        )


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

    def drop(self, request_hash: str) -> None:
        with self._lock:
            old = self._entries.pop(request_hash, None)
            self._bytes -= old.size if old else 0

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
