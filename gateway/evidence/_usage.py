"""Token usage and its cost per caller, task or model, from what the audit log recorded.

    report = usage_report(store.iter_events, catalog, by="caller", filters=EventFilter())
    report.rows[0].key, report.rows[0].input_tokens, report.rows[0].cost_usd

Usage comes from the ``usage`` the provider returned, as each outcome event recorded it:
RESPONSE events, CANCELLED events that carry one (an answer that had arrived before the
caller left was billed all the same), and the outcome of each live replay's send (a REPLAY
event, under its operator and the replayed task: a migration test is spend too). Cache hits
and rejected requests made no upstream call and cost nothing. The events are streamed page
by page; memory holds one row per group.

Each row also counts its requests by the caller contract of the policy version they ran
under ("strict" or "opened", :func:`gateway.policy.contract_of` of the recorded content):
coverage, the share of a task's traffic whose callers brought their own parts.

Cost uses the catalog's per-model prices (US dollars per million tokens, each with a dated
source). A group with usage of a model the catalog does not price has that part counted in
``unpriced_requests`` and never estimated: a figure nobody can source is worse than none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from audit import EventFilter, EventKind, StoredEvent
from audit.reports.requests import USAGE_COLUMNS, RequestSummary
from gateway.catalog import Catalog, ModelInfo
from gateway.policy import contract_of

__all__ = [
    "TOKEN_KINDS",
    "GroupBy",
    "UsageReport",
    "UsageRow",
    "answer_cost",
    "covered",
    "priced",
    "usage_report",
]

GroupBy = Literal["caller", "task", "model"]

# The usage fields summed, each with the catalog price that applies to it.
TOKEN_KINDS: Mapping[str, str] = {
    "input_tokens": "price_input",
    "output_tokens": "price_output",
    "cache_creation_input_tokens": "price_cache_write",
    "cache_read_input_tokens": "price_cache_read",
}
PER = 1_000_000  # prices are per million tokens
USAGE_KINDS = (EventKind.RESPONSE, EventKind.CANCELLED, EventKind.REPLAY)
NONE = "(none)"  # the group of events without a caller, task or model

EventSource = Callable[..., Iterable[StoredEvent]]


class UsageRow(BaseModel):
    """One group's usage. ``cost_usd`` is the cost of its priced part (None: nothing in it is
    priced); ``unpriced_requests`` counts the requests whose model has no sourced price."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    requests: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    cost_usd: float | None
    unpriced_requests: int
    models: tuple[str, ...]  # the models the group's usage is of (its prices' entries)
    # Requests by the caller contract they ran under: {"strict": 3, "opened": 2}; a policy
    # version whose content is not in the log counts as "unknown".
    contracts: dict[str, int] = {}

    @property
    def contract(self) -> str:
        """ "strict", "opened", "mixed" (some of each), or "-" (none known)."""
        known = {c for c in self.contracts if c != "unknown"}
        return known.pop() if len(known) == 1 else "mixed" if known else "-"

    @property
    def priced(self) -> bool:
        return self.unpriced_requests == 0


class UsageReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    by: GroupBy
    since: datetime | None
    until: datetime | None
    rows: tuple[UsageRow, ...]
    total: UsageRow
    # Where each price used came from: model id -> {price fact: source}.
    price_sources: dict[str, dict[str, str]]


@dataclass
class _Sum:
    requests: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KINDS, 0))
    cost: float = 0.0
    priced_requests: int = 0
    unpriced_requests: int = 0
    models: set[str] = field(default_factory=set)
    contracts: dict[str, int] = field(default_factory=dict)

    def add(
        self,
        model: str | None,
        usage: Mapping[str, int],
        info: ModelInfo | None,
        contract: str | None = None,
    ) -> None:
        self.requests += 1
        kind = contract or "unknown"
        self.contracts[kind] = self.contracts.get(kind, 0) + 1
        if model is not None:
            self.models.add(model)
        for kind, count in usage.items():
            self.tokens[kind] += count
        cost = _cost(usage, info)
        if cost is None:
            self.unpriced_requests += 1
        else:
            self.cost += cost
            self.priced_requests += 1

    def row(self, key: str) -> UsageRow:
        t = self.tokens
        return UsageRow(
            key=key,
            requests=self.requests,
            input_tokens=t["input_tokens"],
            output_tokens=t["output_tokens"],
            cache_write_tokens=t["cache_creation_input_tokens"],
            cache_read_tokens=t["cache_read_input_tokens"],
            cost_usd=self.cost if self.priced_requests else None,
            unpriced_requests=self.unpriced_requests,
            models=tuple(sorted(self.models)),
            contracts=dict(sorted(self.contracts.items())),
        )


def _cost(usage: Mapping[str, int], info: ModelInfo | None) -> float | None:
    """The cost of one answer's usage, or None when a token kind it used has no price."""
    if info is None:
        return None
    total = 0.0
    for kind, count in usage.items():
        price = getattr(info, TOKEN_KINDS[kind])
        if price is None:
            if count:
                return None
            continue
        total += count * price / PER
    return total


def answer_cost(usage: object, info: ModelInfo | None) -> float | None:
    """The cost of one answer's ``usage`` (the Messages API object) at ``info``'s prices, as
    :func:`usage_report` prices it; None when there is no usage or a kind it used has no price
    (a replay report compares two answers this way)."""
    counts = _token_counts(usage)
    return _cost(counts, info) if counts else None


def priced(summary: RequestSummary, catalog: Catalog) -> RequestSummary:
    """``summary`` with ``cost_usd``: its recorded usage priced as :func:`usage_report` prices
    it (the model that answered; cache writes and reads at their own prices). None when it
    recorded no usage (no upstream call: a cache hit, a rejection) or its model, or a token
    kind it used, has no sourced price."""
    usage = {
        kind: count
        for kind, column in USAGE_COLUMNS.items()
        if (count := getattr(summary, column)) is not None
    }
    info = catalog.get(summary.model) if summary.model is not None and usage else None
    return summary.model_copy(update={"cost_usd": _cost(usage, info)})


def _usage(event: StoredEvent) -> dict[str, int] | None:
    """The token counts an outcome recorded (non-negative integers only), or None."""
    return _token_counts(event.data.get("usage"))


def _token_counts(usage: object) -> dict[str, int] | None:
    """The token counts of a Messages-API ``usage`` object (non-negative integers only)."""
    if not isinstance(usage, dict):
        return None
    counts = {
        kind: value
        for kind in TOKEN_KINDS
        if isinstance(value := usage.get(kind), int) and not isinstance(value, bool) and value >= 0
    }
    return counts or None


def _model(event: StoredEvent) -> str | None:
    model = event.data.get("model")
    return model if isinstance(model, str) and model else None


def _key(event: StoredEvent, by: GroupBy, model: str | None) -> str:
    value: Any = {"caller": event.caller, "task": event.task, "model": model}[by]
    return value if isinstance(value, str) and value else NONE


def _outcomes(events: EventSource, filters: EventFilter) -> Iterator[StoredEvent]:
    where = filters.model_dump(exclude={"kind"})
    for kind in USAGE_KINDS:
        if filters.kind is None or filters.kind == kind:
            yield from events(**where, kind=kind)


def usage_report(
    events: EventSource,
    catalog: Catalog,
    *,
    by: GroupBy,
    filters: EventFilter | None = None,
    content: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> UsageReport:
    """Sum the recorded usage of the outcomes matching ``filters``, grouped ``by``.

    ``events`` is the store's paging reader (:meth:`audit.AuditStore.iter_events`); a row's
    model is the one that answered (echoed in the outcome), priced from ``catalog``;
    ``content`` reads a recorded policy version by fingerprint, for each row's contracts.
    """
    contracts = _ContractLookup(content) if content is not None else None
    filters = filters or EventFilter()
    groups: dict[str, _Sum] = {}
    total = _Sum()
    sources: dict[str, dict[str, str]] = {}
    for event in _outcomes(events, filters):
        usage = _usage(event)
        if usage is None:
            continue
        model = _model(event)
        info = catalog.get(model) if model is not None else None
        if info is not None and model is not None and model not in sources:
            sources[model] = {
                fact: info.sources[fact]
                for fact in TOKEN_KINDS.values()
                if getattr(info, fact) is not None and fact in info.sources
            }
        contract = contracts(event.policy_fingerprint) if contracts is not None else None
        groups.setdefault(_key(event, by, model), _Sum()).add(model, usage, info, contract)
        total.add(model, usage, info, contract)
    return UsageReport(
        by=by,
        since=filters.since,
        until=filters.until,
        rows=tuple(groups[k].row(k) for k in sorted(groups)),
        total=total.row("total"),
        price_sources={m: s for m, s in sorted(sources.items()) if s},
    )


class _ContractLookup:
    """The caller contract of each recorded policy version, read from the log once per
    fingerprint: ``lookup(fingerprint)`` is "strict", "opened", or None (no such content)."""

    def __init__(self, content: Callable[[str], Mapping[str, Any] | None]) -> None:
        self._content = content
        self._known: dict[str, str | None] = {}

    def __call__(self, fingerprint: str | None) -> str | None:
        if fingerprint is None:
            return None
        if fingerprint not in self._known:
            self._known[fingerprint] = contract_of(self._content(fingerprint))
        return self._known[fingerprint]


def covered(
    rows: Iterable[RequestSummary],
    catalog: Catalog,
    content: Callable[[str], Mapping[str, Any] | None],
) -> list[RequestSummary]:
    """``rows`` priced (:func:`priced`), each with the caller contract of the policy version
    it ran under, read by ``content`` (the store's policy reader) once per version."""
    contracts = _ContractLookup(content)
    return [
        priced(row, catalog).model_copy(update={"contract": contracts(row.policy_fingerprint)})
        for row in rows
    ]
