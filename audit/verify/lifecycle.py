"""Each request's life, checked as verify walks the log: outcomes follow intents, once.

    life = Lifecycle()
    life.feed(seq, parsed)                       # each parsed body, in seq order
    targets, request_ids = life.wanted()         # what the page's events name, to look up
    for seq, kind, detail in life.settle(lookup_targets(targets), lookup_lives(request_ids)):
        ...                                      # a defect

The hash chain and the record signatures prove that each event is intact and who wrote it;
these checks prove that the events fit together (docs/security.md):

- every outcome (RESPONSE, FAILED, CANCELLED) and every ATTEMPT_FAILED follows an open intent
  with the same request id and request hash (a REQUEST; for an attempt, a replay's intent too);
- a request has at most one terminal outcome (RESPONSE, FAILED, CANCELLED): the first ends it;
- a CACHE_HIT names (``served_seq``, ``served_hash``) an earlier RESPONSE of the same request
  hash whose hash is the one named;
- a REPLAY outcome's ``intent_seq`` is an open intent of the same replay run, and a REPLAY's
  ``original_seq`` an earlier event of the request it names;
- an INTEGRITY_ALERT's ``served_seq`` is an earlier event (an alert for content planted
  ahead of its event, ``check: "content_conflict"``, names none: no event of it exists).

Memory stays flat on any size of log: only *open* intents are held (a request that ended is
forgotten; one that never ended is an incomplete request, a handful at most, and past
:data:`MAX_OPEN` the oldest are let go), and what an event names by seq is looked up once per
page of the walk, not remembered. An outcome with no open intent in memory is rare (it is a
defect, or its REQUEST was let go), so it is settled by a lookup of that request's events,
also once per page: "no REQUEST", "a second outcome", or (a REQUEST let go) fine.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from audit.store.models import DefectKind

TERMINAL = frozenset({"response", "failed", "cancelled"})
MAX_OPEN = 100_000  # open REQUESTs held in memory; older ones are settled by a lookup
INTENT_KINDS = ("request", *sorted(TERMINAL))  # what settle() needs of an unmatched request
NAMING_KINDS = frozenset({"cache_hit", "replay", "integrity_alert"})  # their data names seqs
# Every kind a life is checked on: the bodies of other kinds are not fed.
FED_KINDS = frozenset({*INTENT_KINDS, "attempt_failed", *NAMING_KINDS})
Key = tuple[str, str | None]  # (request_id, request_hash)


class Target(NamedTuple):
    """What the events table holds at a seq an event names."""

    seq: int
    kind: str
    request_id: str
    request_hash: str | None
    hash: str


class _Ref(NamedTuple):
    seq: int  # the naming event
    field: str  # which of its data fields
    target: int
    kind: str | None  # the kind the target must have (None: any)
    request_id: str | None  # the request id it must have (None: any)
    request_hash: str | None
    check_hash: bool
    hash: str | None


class _Unmatched(NamedTuple):
    seq: int
    kind: str
    key: Key


Found = tuple[int, DefectKind, str]


def _seq_field(data: Mapping[str, Any], name: str) -> int | str | None:
    """A seq named by ``data[name]``: the int, None when absent, or why it is not a seq."""
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name} {str(value)[:40]!r} is not a seq"
    return value


class Lifecycle:
    def __init__(self) -> None:
        self.open: dict[Key, int] = {}  # an open REQUEST: its seq
        self.open_replays: dict[int, Key] = {}  # an open replay intent, by its seq
        self.replay_keys: dict[Key, int] = {}  # how many open replay intents have the key
        self._refs: list[_Ref] = []
        self._unmatched: list[_Unmatched] = []
        self._found: list[Found] = []

    # -- the walk ---------------------------------------------------------------------------

    def feed(self, seq: int, parsed: Mapping[str, Any]) -> None:
        kind = parsed.get("kind")
        # The other kinds have no part in a request's life (a list or object kind would not
        # even hash: the column check names it).
        if isinstance(kind, str) and kind in FED_KINDS:
            self.feed_fields(
                seq, kind, parsed.get("request_id"), parsed.get("request_hash"),
                parsed.get("data") if kind in NAMING_KINDS else None,
            )  # fmt: skip

    def feed_fields(self, seq: int, kind: Any, rid: Any, rhash: Any, data: Any) -> None:
        """:meth:`feed` of a body given as the four fields a life is checked on (a range
        walk's worker sends only these: audit.verify._parallel)."""
        if (
            not isinstance(kind, str)
            or not isinstance(rid, str)
            or not (rhash is None or isinstance(rhash, str))
        ):
            return  # not an event body of the right shape: the column check names it
        key = (rid, rhash)
        if kind == "request":
            if key not in self.open:
                if len(self.open) >= MAX_OPEN:
                    del self.open[next(iter(self.open))]  # the oldest: settled by lookup
                self.open[key] = seq
        elif kind in TERMINAL:
            if self.open.pop(key, None) is None:
                self._unmatched.append(_Unmatched(seq, kind, key))
        elif kind == "attempt_failed":
            if key not in self.open and not self.replay_keys.get(key):
                self._unmatched.append(_Unmatched(seq, kind, key))
        elif kind in NAMING_KINDS:
            self._named(seq, kind, key, data if isinstance(data, dict) else {})

    def _named(self, seq: int, kind: str, key: Key, data: Mapping[str, Any]) -> None:
        if kind == "cache_hit":
            served = self._ref_seq(seq, data, "served_seq", required=True)
            if served is not None:
                served_hash = data.get("served_hash")
                served_rid = data.get("served_request_id")
                self._refs.append(
                    _Ref(seq, "served_seq", served, "response",
                         served_rid if isinstance(served_rid, str) else None,
                         key[1], True, served_hash if isinstance(served_hash, str) else None)
                )  # fmt: skip
        elif kind == "integrity_alert":
            # A content conflict was refused before any event of it existed: it names none.
            planted = data.get("check") == "content_conflict"
            served = self._ref_seq(seq, data, "served_seq", required=not planted)
            if served is not None:
                self._refs.append(_Ref(seq, "served_seq", served, None, None, None, False, None))
        else:  # replay
            original = self._ref_seq(seq, data, "original_seq", required=False)
            if original is not None:
                orid = data.get("original_request_id")
                self._refs.append(
                    _Ref(seq, "original_seq", original, None,
                         orid if isinstance(orid, str) else None, None, False, None)
                )  # fmt: skip
            if data.get("phase") == "intent":
                self.open_replays[seq] = key
                self.replay_keys[key] = self.replay_keys.get(key, 0) + 1
            elif data.get("phase") == "outcome":
                intent = self._ref_seq(seq, data, "intent_seq", required=False)
                if intent is not None:
                    self._close_replay(seq, key, intent)

    def _ref_seq(
        self, seq: int, data: Mapping[str, Any], name: str, *, required: bool
    ) -> int | None:
        value = _seq_field(data, name)
        if isinstance(value, str):
            self._found.append((seq, DefectKind.BAD_REFERENCE, value))
            return None
        if value is None:
            if required:
                self._found.append((seq, DefectKind.BAD_REFERENCE, f"it names no {name}"))
            return None
        if not 1 <= value < seq:
            self._found.append(
                (seq, DefectKind.BAD_REFERENCE, f"{name} {value} is not an earlier event")
            )
            return None
        return value

    def _close_replay(self, seq: int, key: Key, intent: int) -> None:
        opened = self.open_replays.get(intent)
        if opened is None or opened[0] != key[0]:
            self._found.append(
                (seq, DefectKind.BAD_REFERENCE,
                 f"intent_seq {intent} is not an open intent of replay run {key[0]!r}")
            )  # fmt: skip
            return
        del self.open_replays[intent]
        left = self.replay_keys[opened] - 1
        if left:
            self.replay_keys[opened] = left
        else:
            del self.replay_keys[opened]

    # -- once per page ------------------------------------------------------------------------

    def wanted(self) -> tuple[set[int], set[str]]:
        """The seqs the page's events name, and the request ids of its unmatched outcomes."""
        return {r.target for r in self._refs}, {u.key[0] for u in self._unmatched}

    def settle(self, targets: Mapping[int, Target], lives: Iterable[Target]) -> Iterator[Found]:
        """The page's defects, given the rows at the named seqs and, for the request ids of
        :meth:`wanted`, their REQUEST and terminal events (kinds :data:`INTENT_KINDS`)."""
        yield from self._found
        for ref in self._refs:
            problem = _check_ref(ref, targets.get(ref.target))
            if problem is not None:
                yield (ref.seq, DefectKind.BAD_REFERENCE, problem)
        by_key: dict[Key, list[Target]] = {}
        for row in lives:
            by_key.setdefault((row.request_id, row.request_hash), []).append(row)
        for u in self._unmatched:
            found = _unmatched(u, by_key.get(u.key, []))
            if found is not None:
                yield found
        self._refs, self._unmatched, self._found = [], [], []


def _check_ref(ref: _Ref, row: Target | None) -> str | None:
    name = f"{ref.field} {ref.target}"
    if row is None:
        return f"{name} names no event in the log"
    if ref.kind is not None and row.kind != ref.kind:
        return f"{name} is a {row.kind} event, not a {ref.kind}"
    if ref.request_id is not None and row.request_id != ref.request_id:
        return f"{name} is an event of request {row.request_id!r}, not {ref.request_id!r}"
    if ref.kind == "response" and row.request_hash != ref.request_hash:
        return f"{name} is the RESPONSE of another request hash"
    if ref.check_hash and row.hash != ref.hash:
        return f"{name} has hash {row.hash}, not the {ref.hash} it names"
    return None


def _unmatched(u: _Unmatched, rows: list[Target]) -> Found | None:
    rid = u.key[0]
    intent = next((r for r in rows if r.kind == "request" and r.seq < u.seq), None)
    if intent is not None:
        ended = next((r for r in rows if r.kind in TERMINAL and intent.seq < r.seq < u.seq), None)
        if ended is None:
            return None  # its REQUEST was open, only no longer held in memory (MAX_OPEN)
        if u.kind == "attempt_failed":
            return (
                u.seq,
                DefectKind.ORPHAN_OUTCOME,
                f"an attempt of request {rid!r} after it ended at seq {ended.seq} ({ended.kind})",
            )
        return (
            u.seq,
            DefectKind.DUPLICATE_OUTCOME,
            f"a second terminal outcome ({u.kind}) of request {rid!r}: it already ended "
            f"at seq {ended.seq} ({ended.kind})",
        )
    what = "an attempt" if u.kind == "attempt_failed" else f"a {u.kind}"
    return (
        u.seq,
        DefectKind.ORPHAN_OUTCOME,
        f"{what} of request {rid!r} with no open REQUEST (or replay intent) of the same "
        "request id and request hash before it",
    )
