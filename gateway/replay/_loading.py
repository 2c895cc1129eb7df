"""Load a replay's selection page by page, so memory holds one page whatever the log's size.

    selected = load_selection(store, Selection(task="compliance_review", limit=None))
    len(selected)                     # how many requests, known before any is replayed
    for recorded in selected: ...     # loaded PAGE requests at a time, payloads included

Loading validates before anything is replayed or recorded: an unknown request id, or a
selected request whose recorded policy version is missing from the database, is an
``InputError``. Request ids named on the command line are loaded at once (they are few);
a selection by filters is first walked on the event columns alone (no body is read) to count
it and check its policy versions, then loaded page by page: one query for the page's events,
one for their payloads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from audit import AuditStore, EventKind, StoredEvent
from audit.store import EventKey
from gateway.errors import InputError
from gateway.policy import Policy
from gateway.replay._recorded import (
    Recorded,
    Selection,
    _ids_from_filters,
    check_selection,
    policy_of,
    recorded_from,
    where_of,
)

PAGE = 500  # requests loaded at a time


class RecordedSet:
    """The selected requests: how many, and their loading in selection order."""

    def __init__(
        self,
        total: int,
        pages: Callable[[], Iterable[Sequence[str]]],
        load: Callable[[Sequence[str]], list[Recorded]],
    ) -> None:
        self.total = total
        self._pages = pages
        self._load = load

    @classmethod
    def of(cls, items: Sequence[Recorded]) -> RecordedSet:
        """A selection already loaded (request ids named one by one)."""
        loaded = {r.request_id: r for r in items}
        ids = [r.request_id for r in items]
        return cls(len(items), lambda: [ids], lambda page: [loaded[i] for i in page])

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[Recorded]:
        for page in self._pages():
            yield from self._load(page)


def load_selection(store: AuditStore, selection: Selection, *, page: int = PAGE) -> RecordedSet:
    """``page``: requests loaded at a time."""
    check_selection(selection)
    policies: dict[str, Policy] = {}
    if selection.by_id:
        ids = list(dict.fromkeys(selection.request_ids))
        items = [
            r for chunk in _chunks(ids, page) for r in load_page(store, chunk, policies, named=True)
        ]
        return RecordedSet.of(items)
    if selection.limit:  # the newest ``limit``: their ids, as many as the caller asked for
        ids = _ids_from_filters(store, selection)
        keys = [k for chunk in _chunks(ids, page) for k in _request_keys(store, chunk)]
        _check_policies(store, keys, policies)
        return RecordedSet(
            len(ids), lambda: _chunks(ids, page), lambda chunk: load_page(store, chunk, policies)
        )
    # Every match, up to the head found now (requests recorded during the run are not in it).
    upto = store.head()[0]
    where = where_of(selection)

    def key_pages() -> Iterator[list[EventKey]]:
        last = 0
        while True:
            keys = store.event_keys(**where, after_seq=last, before_seq=upto + 1, limit=page)
            if keys:
                yield keys
            if len(keys) < page:
                return
            last = keys[-1].seq

    total = 0
    for keys in key_pages():
        total += len(keys)
        _check_policies(store, keys, policies)
    return RecordedSet(
        total,
        lambda: ([k.request_id for k in keys] for keys in key_pages()),
        lambda chunk: load_page(store, chunk, policies),
    )


def load_page(
    store: AuditStore, ids: Sequence[str], policies: dict[str, Policy], *, named: bool = False
) -> list[Recorded]:
    """The requests ``ids`` in that order, each with its events and their payloads.
    ``named``: the ids were given by the user, so one with no events is bad input."""
    events: dict[str, list[StoredEvent]] = defaultdict(list)
    for event in store.iter_events(request_ids=ids):
        events[event.request_id].append(event)
    out = []
    for request_id in ids:
        life = tuple(events.get(request_id, ()))
        if not life:
            if not named:  # a selected request cannot lose its events: the log is append-only
                raise InputError(f"the events of request {request_id!r} could not be read.")
            raise InputError(
                f"no recorded request has id {request_id!r}.",
                hint="List request ids with 'gateway audit list'.",
            )
        out.append(recorded_from(store, request_id, life, policies))
    refs = [
        ref
        for r in out
        for event in (r.request, r.response)
        if event is not None
        for ref in event.payload_digests.values()
    ]
    found = store.payloads(refs)  # one read for the page; a missing one is read alone later
    return [_with_payloads(r, found) for r in out]


def _with_payloads(recorded: Recorded, found: dict[str, bytes]) -> Recorded:
    return replace(recorded, payloads=found)


def _request_keys(store: AuditStore, ids: Sequence[str]) -> list[EventKey]:
    return store.event_keys(kind=EventKind.REQUEST, request_ids=ids, limit=len(ids))


def _check_policies(
    store: AuditStore, keys: Iterable[EventKey], policies: dict[str, Policy]
) -> None:
    for key in keys:
        fingerprint = key.policy_fingerprint
        if fingerprint and fingerprint not in policies:
            policies[fingerprint] = policy_of(store, key.request_id, fingerprint)


def _chunks(ids: Sequence[str], size: int) -> list[Sequence[str]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]
