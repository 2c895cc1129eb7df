"""The two answers of a live replay, side by side: text, latency and estimated cost of each.

    recorded = answer_side(text, response_data, catalog)     # from the RESPONSE event
    replayed = answer_side(text, reply.response, catalog, latency_ms=reply.latency_ms)
    tally.add(recorded, replayed, similarity); tally.totals()  # per task, in the report

Each text is cut at ``TEXT_LIMIT`` characters with a visible mark saying how much was left
out; the report escapes it where it is shown (it is untrusted model output). Cost is the
answer's recorded usage at the catalog's prices for the model that answered
(gateway.evidence.answer_cost); a model or token kind without a sourced price is *unpriced*
(``cost_usd`` None with ``priced`` False), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from gateway.catalog import Catalog
from gateway.evidence import answer_cost

TEXT_LIMIT = 2_000  # characters of each answer a report shows


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AnswerSide(_Frozen):
    """One answer as a report shows it beside the other."""

    text: str  # at most TEXT_LIMIT characters of the answer, then the truncation mark
    truncated_chars: int = 0  # how many characters were cut off (0: shown whole)
    length: int = 0  # the whole answer's length in characters
    model: str | None = None  # the model that answered (as echoed), else the one asked
    latency_ms: float | None = None  # the successful attempt's round trip
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None  # None: unpriced (see ``priced``) or no usage recorded
    priced: bool = False

    @property
    def cost_text(self) -> str:
        return "unpriced" if self.cost_usd is None else f"${self.cost_usd:,.6f}"

    def excerpt(self, limit: int) -> str:
        """The answer cut at ``limit`` characters, the mark counting from the whole answer."""
        if self.length <= limit:
            return self.text
        return f"{self.text[:limit]}{_mark(self.length - limit)}"

    @property
    def latency_text(self) -> str:
        return "-" if self.latency_ms is None else f"{self.latency_ms:,.0f} ms"


class SideTotals(_Frozen):
    answers: int
    mean_latency_ms: float | None
    cost_usd: float | None  # the sum over the priced answers; None when none was priced
    unpriced: int  # answers without a sourced price (left out of cost_usd)

    @property
    def cost_text(self) -> str:
        if self.cost_usd is None:
            return "unpriced"
        extra = f" (+{self.unpriced} unpriced)" if self.unpriced else ""
        return f"${self.cost_usd:,.6f}{extra}"

    @property
    def latency_text(self) -> str:
        return "-" if self.mean_latency_ms is None else f"{self.mean_latency_ms:,.0f} ms"


class LiveTotals(_Frozen):
    """A task's live comparison: how many answer pairs, how alike, how fast, how costly."""

    compared: int
    mean_similarity: float | None
    recorded: SideTotals
    replayed: SideTotals


def truncated(text: str, limit: int = TEXT_LIMIT) -> tuple[str, int]:
    """``text`` cut at ``limit`` characters with a mark, and how many characters were cut."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    return f"{text[:limit]}{_mark(cut)}", cut


def _mark(cut: int) -> str:
    return f"… [truncated: {cut:,} more characters]"


def answer_side(
    text: str,
    response: Mapping[str, Any],
    catalog: Catalog,
    *,
    asked_model: str | None,
    latency_ms: float | None,
) -> AnswerSide:
    """``response``: the message (or a RESPONSE event's data) with ``model`` and ``usage``."""
    shown, cut = truncated(text)
    echoed = response.get("model")
    model = echoed if isinstance(echoed, str) and echoed else asked_model
    usage = response.get("usage")
    info = catalog.get(model) if model else None
    cost = answer_cost(usage, info)
    counts = usage if isinstance(usage, dict) else {}
    return AnswerSide(
        text=shown,
        truncated_chars=cut,
        length=len(text),
        model=model,
        latency_ms=_number(latency_ms),
        input_tokens=_count(counts.get("input_tokens")),
        output_tokens=_count(counts.get("output_tokens")),
        cost_usd=cost,
        priced=cost is not None,
    )


class SideTally:
    """Running totals of one side's answers (a run's rows are not kept: memory stays flat)."""

    def __init__(self) -> None:
        self.answers = self.unpriced = self._timed = 0
        self._latency = 0.0
        self._cost: float | None = None  # None until an answer is priced

    def add(self, side: AnswerSide) -> None:
        self.answers += 1
        if side.latency_ms is not None:
            self._timed += 1
            self._latency += side.latency_ms
        if side.cost_usd is None:
            self.unpriced += 1
        else:
            self._cost = (self._cost or 0.0) + side.cost_usd

    def totals(self) -> SideTotals:
        return SideTotals(
            answers=self.answers,
            mean_latency_ms=self._latency / self._timed if self._timed else None,
            cost_usd=self._cost,
            unpriced=self.unpriced,
        )


class LiveTally:
    """Running totals of (recorded, replayed, similarity) answer pairs."""

    def __init__(self) -> None:
        self.compared = self._similar = 0
        self._similarity = 0.0
        self.recorded, self.replayed = SideTally(), SideTally()

    def add(self, recorded: AnswerSide, replayed: AnswerSide, similarity: float | None) -> None:
        self.compared += 1
        if similarity is not None:
            self._similar += 1
            self._similarity += similarity
        self.recorded.add(recorded)
        self.replayed.add(replayed)

    def totals(self) -> LiveTotals | None:
        """None when no pair was added."""
        if not self.compared:
            return None
        mean = round(self._similarity / self._similar, 4) if self._similar else None
        return LiveTotals(
            compared=self.compared,
            mean_similarity=mean,
            recorded=self.recorded.totals(),
            replayed=self.replayed.totals(),
        )


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
