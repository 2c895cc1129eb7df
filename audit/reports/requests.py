"""One row per request, with its status, for `gateway audit list`.

    rows = list_requests(store, EventFilter(task="t"), status=request_status, limit=50)
    rows[0].status        # what request_status folded from the request's events

A request's status is the caller's: ``status`` folds it over the request's events in seq
order (the gateway passes the rule of its own vocabulary). ``label`` names a request made
under a derived policy (an experiment, offline mode): the ``derived.label`` its first event
records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from audit.reports.export import EventFilter
from audit.store import AuditStore
from audit.store.models import EventKind, StoredEvent

# The recorded usage fields the list carries, and the column each is shown in.
USAGE_COLUMNS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
}
PENDING_PAGE = 1_000  # request ids asked about in one query
# How a request's status folds over its events (the gateway's vocabulary): the status so far
# ("" before the first event) and the next event give the status after it.
StatusRule = Callable[[str, StoredEvent], str]


class RequestSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str
    status: str
    task: str | None
    caller: str | None
    label: str | None = None
    started_at: datetime
    first_seq: int
    last_seq: int
    events: int
    attempts_failed: int
    kinds: tuple[str, ...]
    # From the outcome's data: the model that answered (else the one asked), tokens, latency.
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_write_tokens: int | None = None  # usage.cache_creation_input_tokens
    cache_read_tokens: int | None = None  # usage.cache_read_input_tokens
    latency_ms: float | None = None
    # The estimated cost of that usage in US dollars. The audit store knows no prices: the
    # gateway fills this in from its model catalog (gateway.evidence); None where no
    # usage was recorded or the model has no sourced price, never a guessed 0.
    cost_usd: float | None = None
    # Format 2: an event of the request is committed and signed but not yet linked by the
    # integrator (no receipt until its next checkpoint covers it).
    pending_integration: bool = False
    # The policy version the request ran under (its first event's), and the names of the
    # settings its caller asked for (the keys of the intent's or refusal's ``requested``).
    policy_fingerprint: str | None = None
    requested: tuple[str, ...] = ()
    # What the gateway calls the policy's caller contract ("strict", "opened"): the store
    # knows no contracts, the gateway fills it in (gateway.evidence); None where unknown.
    contract: str | None = None


@dataclass
class _Acc:
    """Mutable while the events stream past; frozen into a RequestSummary at the end."""

    first: StoredEvent
    rule: StatusRule
    status: str = ""
    last_seq: int = 0
    attempts_failed: int = 0
    kinds: list[str] = field(default_factory=list)
    measures: dict[str, Any] = field(default_factory=dict)

    def add(self, event: StoredEvent) -> None:
        self.last_seq = event.seq
        self.kinds.append(event.kind.value)
        if event.kind == EventKind.ATTEMPT_FAILED:
            self.attempts_failed += 1
        self.status = self.rule(self.status, event)
        self.measures.update(_measures(event))

    def summary(self) -> RequestSummary:
        return RequestSummary(
            request_id=self.first.request_id,
            status=self.status,
            task=self.first.task,
            caller=self.first.caller,
            label=_label(self.first),
            started_at=self.first.recorded_at,
            policy_fingerprint=self.first.policy_fingerprint,
            first_seq=self.first.seq,
            last_seq=self.last_seq,
            events=len(self.kinds),
            attempts_failed=self.attempts_failed,
            kinds=tuple(self.kinds),
            **self.measures,
        )


def _measures(event: StoredEvent) -> dict[str, Any]:
    """The list's model, token and latency columns, from what this event's data records
    (token counts only as non-negative integers, as gateway.evidence sums them)."""
    data = event.data
    found: dict[str, Any] = {}
    model = data.get("model") if event.kind != EventKind.REQUEST else data.get("model_id")
    if isinstance(model, str):
        found["model"] = model
    usage = data.get("usage")
    if isinstance(usage, dict):
        for key, column in USAGE_COLUMNS.items():
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                found[column] = value
    latency = data.get("latency_ms")
    if isinstance(latency, int | float) and not isinstance(latency, bool):
        found["latency_ms"] = float(latency)
    requested = data.get("requested")
    if event.kind in (EventKind.REQUEST, EventKind.REJECTED) and isinstance(requested, dict):
        found["requested"] = tuple(sorted(k for k in requested if isinstance(k, str)))
    return found


def _label(first: StoredEvent) -> str | None:
    derived = first.data.get("derived")
    label = derived.get("label") if isinstance(derived, dict) else None
    return label if isinstance(label, str) else None


def list_requests(
    store: AuditStore,
    filters: EventFilter | None = None,
    *,
    status: StatusRule,
    limit: int | None = 50,
) -> list[RequestSummary]:
    """The newest ``limit`` requests with an event matching the filters, oldest first, each
    with the status that ``status`` folds from its events (the store gives them no meaning).

    ``kind`` selects requests that have an event of that kind; the other filters apply to
    the events themselves. With a ``limit`` the database picks the requests and memory holds
    only theirs, whatever the size of the log; without one, memory grows with the number
    of matching requests (all are returned), not with the events.
    """
    filters = filters or EventFilter()
    where = filters.model_dump(exclude={"kind"})
    ids = None
    if limit:
        ids = store.newest_requests(limit, **where, having_kind=filters.kind)
        if not ids:
            return []
    accs: dict[str, _Acc] = {}  # insertion-ordered: by first seq
    for event in store.iter_events(**where, request_ids=ids):
        accs.setdefault(event.request_id, _Acc(first=event, rule=status)).add(event)
    selected = [
        a.summary() for a in accs.values() if filters.kind is None or filters.kind.value in a.kinds
    ]
    return _marked_pending(store, selected[-limit:] if limit else selected)


def _marked_pending(store: AuditStore, rows: list[RequestSummary]) -> list[RequestSummary]:
    """``rows`` with ``pending_integration`` set, one query a page of rows."""
    marked: list[RequestSummary] = []
    for at in range(0, len(rows), PENDING_PAGE):
        page = rows[at : at + PENDING_PAGE]
        pending = store.pending_requests(r.request_id for r in page)
        marked += [
            r.model_copy(update={"pending_integration": True}) if r.request_id in pending else r
            for r in page
        ]
    return marked
