"""The typed results of a replay run: one ``RequestReplay`` per recorded request, a summary.

    report.summary.counts          # {"identical": 3, "differing": 1, "failed": 0, "skipped": 1}
    report.requests[0].outcome     # Outcome.IDENTICAL
    report.requests[0].text_diff   # a unified diff of the response text, or None

These cross the library/CLI boundary (table, JSON, HTML), so they are frozen pydantic models.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway.replay._answers import AnswerSide, LiveTally, LiveTotals


class Mode(StrEnum):
    VERIFY = "verify"  # re-plan under the recorded policy; pass or fail
    LIVE = "live"  # re-send the recorded wire body; a report
    MODEL = "model"  # re-plan under another model; what it would refuse or change
    MODEL_LIVE = "model-live"  # re-plan under another model, send it, diff the answer
    POLICIES = "policies"  # re-plan under a candidate policy folder (--policies DIR)
    POLICIES_LIVE = "policies-live"  # ... send it, diff the answer

    @property
    def replans(self) -> bool:
        """Re-plans each request (another model or candidate policies): a migration report."""
        return self in (Mode.MODEL, Mode.MODEL_LIVE, Mode.POLICIES, Mode.POLICIES_LIVE)

    @property
    def sends(self) -> bool:
        """Sends requests upstream (a live run)."""
        return self in (Mode.LIVE, Mode.MODEL_LIVE, Mode.POLICIES_LIVE)


class Outcome(StrEnum):
    PASSED = "passed"  # verify: every check held
    IDENTICAL = "identical"  # live: the same answer; model: the same request but the model id
    DIFFERING = "differing"  # live: another answer; model: the request changes beyond the id
    REFUSED = "refused"  # model: the policy cannot be honoured by the new model
    FAILED = "failed"  # verify: a check failed; live: the call failed
    SKIPPED = "skipped"  # not replayable in this mode (retired model, rejected, cache hit)
    INVALID = "invalid"  # live: the new answer fails the check production runs (its schema)
    ERASED = "erased"  # its content was erased by policy (an erasure event): nothing to check


# The four the issue names always show in a summary; the others only when they occur.
SUMMARY_ORDER = (
    Outcome.IDENTICAL,
    Outcome.DIFFERING,
    Outcome.FAILED,
    Outcome.SKIPPED,
    Outcome.PASSED,
    Outcome.REFUSED,
    Outcome.INVALID,
    Outcome.ERASED,
)
ALWAYS_SHOWN = frozenset(SUMMARY_ORDER[:4])


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Check(_Frozen):
    """One verify check: its name, whether it held, and what was compared."""

    name: str
    ok: bool
    detail: str


class FieldChange(_Frozen):
    """One difference between two JSON values, at a JSON path like ``$.amount``."""

    path: str
    change: str  # "added" | "removed" | "changed"
    recorded: Any = None
    replayed: Any = None


class RequestReplay(_Frozen):
    request_id: str
    seq: int  # the recorded REQUEST event (or the first event when there is none)
    task: str | None
    caller: str | None
    model_id: str | None  # the model recorded with the request
    target_model: str | None = None  # --model: the model it was re-planned for
    mode: Mode
    outcome: Outcome
    reason: str | None = None  # one line: why it failed, was skipped or refused
    checks: tuple[Check, ...] = ()
    findings: tuple[str, ...] = ()  # --model: the review findings for the new model
    request_changes: tuple[FieldChange, ...] = ()  # --model: wire body changes
    # difflib's SequenceMatcher ratio of the recorded and replayed answer text, 0..1: twice
    # the matched characters over the two lengths (gateway.replay._diff).
    similarity: float | None = None
    text_diff: str | None = None  # unified diff of the response text
    json_changes: tuple[FieldChange, ...] = ()  # JSON tasks: field-by-field changes
    # --live: both answers side by side (text cut with a mark, latency, estimated cost).
    recorded_answer: AnswerSide | None = None
    replayed_answer: AnswerSide | None = None
    replay_seq: int | None = None  # the REPLAY event that records this result
    # --live, for a task whose answers carry a verdict (gateway.replay._verdicts): each side's.
    recorded_verdict: str | None = None
    replayed_verdict: str | None = None
    # The policy version (fingerprint) each side used: the one the request was recorded
    # under, and the one it was replayed under (a migration's or a candidate folder's).
    recorded_policy: str | None = None
    replayed_policy: str | None = None

    @property
    def flipped(self) -> bool:
        """Whether the answer's verdict changed (both answers have one, and they differ)."""
        old, new = self.recorded_verdict, self.replayed_verdict
        return old is not None and new is not None and old != new


class Summary(_Frozen):
    mode: Mode
    run_id: str
    counts: dict[str, int]
    total: int

    def line(self) -> str:
        parts = ", ".join(f"{n} {name}" for name, n in self.counts.items())
        return f"{self.mode.value}: {self.total} request(s): {parts}"


class ReportContext(_Frozen):
    """Who made a report, when, from which store and with which gateway: what a reader needs
    before trusting it. ``store`` is the database URL with its password masked."""

    made_at: datetime
    operator: str
    store: str
    gateway_version: str
    # Which requests the report covers, as the run was asked for them ("" when not said).
    selection: str = ""

    @classmethod
    def made(cls, operator: str, store: str, selection: str = "") -> ReportContext:
        """The context of a report made now by ``operator`` from ``store`` (masked URL)
        over ``selection`` (:func:`selection_text`)."""
        from gateway._keys import GATEWAY_VERSION  # the version is the gateway's, not the model's

        return cls(
            made_at=datetime.now(UTC),
            operator=operator,
            store=store,
            gateway_version=GATEWAY_VERSION,
            selection=selection,
        )

    def line(self) -> str:
        return (
            f"made {self.made_at:%Y-%m-%d %H:%M:%S} UTC by {self.operator} from {self.store}, "
            f"compliance-gateway {self.gateway_version}"
        )


class Counted(_Frozen):
    """One sentence and how many requests it applies to."""

    text: str
    count: int


class VerdictCell(_Frozen):
    """One cell of a task's flip matrix: how many answer pairs went from the recorded
    verdict to the replayed one, and (for a flip) which requests, to look each pair up."""

    recorded: str
    replayed: str
    count: int
    request_ids: tuple[str, ...] = ()  # the flipped pairs only (recorded != replayed)

    @property
    def flipped(self) -> bool:
        return self.recorded != self.replayed


class TaskSummary(_Frozen):
    """One task's results in a run: outcome counts, and each distinct finding, reason and
    request change once, with how many requests it applies to."""

    task: str
    total: int
    counts: dict[str, int]
    findings: tuple[Counted, ...]
    reasons: tuple[Counted, ...]
    request_changes: tuple[Counted, ...]
    live: LiveTotals | None = None  # --live: the answer pairs' similarity, latency and cost
    # --live, a task whose answers carry a verdict: recorded x replayed verdict counts.
    verdicts: tuple[VerdictCell, ...] = ()
    # Which policy version each side used: "recorded FP -> replayed FP" (each fingerprint's
    # first 12 hex digits, the same on both sides when unchanged), with how many requests.
    policy_versions: tuple[Counted, ...] = ()

    @property
    def flips(self) -> int:
        return sum(c.count for c in self.verdicts if c.flipped)


# What "identical" means under --model, said wherever that outcome is shown.
UNCHANGED_MEANS = (
    "'identical' means the request the new model would get is the recorded one with only the "
    "model id changed; it says nothing about the answers, which may differ (add --live to "
    "send the requests and compare the answers)."
)


# What "identical" means under --model --live, where the answers were compared.
ANSWER_SAME_MEANS = (
    "'identical' means the new model's answer text is the recorded one, character for "
    "character; the request it got is the recorded one re-planned for the new model."
)


def identical_means(mode: Mode) -> str:
    """The sentence a migration report shows beside its outcome counts."""
    return ANSWER_SAME_MEANS if mode.replans and mode.sends else UNCHANGED_MEANS


# What the similarity figure is, said wherever answers are compared side by side.
SIMILARITY_MEANS = (
    "similarity is difflib's SequenceMatcher ratio of the two answer texts, character by "
    "character: twice the characters in matching runs over the total length of both, from 0 "
    "(nothing in common) to 1 (identical); a measure of wording, not of meaning. Cost is "
    "estimated from each answer's recorded usage at the model catalog's prices; 'unpriced' "
    "means the catalog has no sourced price for that model."
)


def _counted(counts: Counter[str]) -> tuple[Counted, ...]:
    return tuple(Counted(text=t, count=n) for t, n in counts.most_common())


class ReplayReport(_Frozen):
    summary: Summary
    requests: tuple[RequestReplay, ...] = Field(default_factory=tuple)
    context: ReportContext | None = None
    # Experiment requests the selection's filters matched and left out (--include-experiments).
    experiments_left_out: int = 0
    # Live runs: requests whose original call failed, left out (--include-failed sends them).
    failed_originals_left_out: int = 0
    # The models the requests were recorded on and, under --model, moved to: known without
    # the rows (a run that streams them keeps none).
    recorded_models: tuple[str, ...] = ()
    target: str | None = None
    # Per task, tallied as the run went (a run that streams its rows keeps none).
    tasks: tuple[TaskSummary, ...] = ()
    # --policies DIR: the candidate folder, and each task's version (fingerprint) in it
    # (None: that task's file does not load).
    candidate: str | None = None
    candidate_versions: dict[str, str | None] = Field(default_factory=dict)

    def spend_text(self) -> str | None:
        """What the run's live calls cost, from their recorded usage at the catalog's prices
        (None for a run that sent nothing)."""
        sides = [t.live.replayed for t in self.by_task() if t.live is not None]
        if not sides:
            return None
        calls = sum(s.answers for s in sides)
        priced = [s.cost_usd for s in sides if s.cost_usd is not None]
        unpriced = sum(s.unpriced for s in sides)
        cost = f"${sum(priced):,.6f}" if priced else "unpriced"
        extra = f" (+{unpriced} unpriced)" if priced and unpriced else ""
        return f"spent: {cost}{extra} on {calls} live call(s) answered"

    @property
    def any_failed(self) -> bool:
        return self.summary.counts.get(Outcome.FAILED.value, 0) > 0

    @property
    def any_refused(self) -> bool:
        return self.summary.counts.get(Outcome.REFUSED.value, 0) > 0

    @property
    def target_model(self) -> str | None:
        """The model a --model run moved the requests to."""
        return self.target or next((r.target_model for r in self.requests if r.target_model), None)

    @property
    def title(self) -> str:
        """``Replay report: MODE`` and the model it is about."""
        mode = self.summary.mode
        if mode in (Mode.POLICIES, Mode.POLICIES_LIVE):
            on = f" on {self.target_model}" if self.target_model else ""
            return f"Replay report: {mode.value}: under candidate policies {self.candidate!r}{on}"
        if mode in (Mode.MODEL, Mode.MODEL_LIVE):
            target = self.target_model or "another model"
            return f"Replay report: {mode.value}: migration to {target}"
        models = sorted(
            {r.model_id for r in self.requests if r.model_id} | set(self.recorded_models)
        )
        return f"Replay report: {mode.value}: " + (
            f"recorded on {', '.join(models)}" if models else "no requests"
        )

    def by_task(self) -> tuple[TaskSummary, ...]:
        """The run per task, each distinct finding, reason and change counted once: tallied
        as the run went (``tasks``), else from the rows this report holds."""
        if self.tasks or not self.requests:
            return self.tasks
        tally = TaskTally()
        for row in self.requests:
            tally.add(row)
        return tally.summaries()


class _Task:
    def __init__(self) -> None:
        self.total = 0
        self.outcomes: Counter[str] = Counter()
        self.findings: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.changes: Counter[str] = Counter()
        self.live = LiveTally()
        self.verdicts: Counter[tuple[str, str]] = Counter()
        self.flipped: dict[tuple[str, str], list[str]] = {}
        self.versions: Counter[str] = Counter()


class TaskTally:
    """A run's per-task summary, built row by row so that no row has to be kept."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}

    def add(self, row: RequestReplay) -> None:
        task = self._tasks.setdefault(row.task or "-", _Task())
        task.total += 1
        task.outcomes[row.outcome.value] += 1
        task.findings.update(row.findings)
        # A refusal's reason restates its findings: said once, as findings.
        if row.reason and not (row.outcome is Outcome.REFUSED and row.findings):
            task.reasons[row.reason] += 1
        task.changes.update(f"{c.path} {c.change}" for c in row.request_changes)
        if row.mode.replans and row.recorded_policy and row.replayed_policy:
            task.versions[f"{short(row.recorded_policy)} -> {short(row.replayed_policy)}"] += 1
        if row.recorded_answer is not None and row.replayed_answer is not None:
            task.live.add(row.recorded_answer, row.replayed_answer, row.similarity)
        if row.recorded_verdict is not None and row.replayed_verdict is not None:
            pair = (row.recorded_verdict, row.replayed_verdict)
            task.verdicts[pair] += 1
            if row.flipped:
                task.flipped.setdefault(pair, []).append(row.request_id)

    def summaries(self) -> tuple[TaskSummary, ...]:
        return tuple(
            TaskSummary(
                task=name,
                total=t.total,
                counts={o.value: t.outcomes[o.value] for o in SUMMARY_ORDER if t.outcomes[o.value]},
                findings=_counted(t.findings),
                reasons=_counted(t.reasons),
                request_changes=_counted(t.changes),
                policy_versions=_counted(t.versions),
                live=t.live.totals(),
                verdicts=tuple(
                    VerdictCell(
                        recorded=old,
                        replayed=new,
                        count=n,
                        request_ids=tuple(t.flipped.get((old, new), ())),
                    )
                    for (old, new), n in sorted(t.verdicts.items())
                ),
            )
            for name, t in sorted(self._tasks.items())
        )


def summarise(mode: Mode, run_id: str, outcomes: Counter[Outcome]) -> Summary:
    """``outcomes``: how many rows had each outcome."""
    counts = {o.value: outcomes[o] for o in SUMMARY_ORDER if o in ALWAYS_SHOWN or outcomes[o]}
    return Summary(mode=mode, run_id=run_id, counts=counts, total=sum(outcomes.values()))


def short(fingerprint: str) -> str:
    """A fingerprint as reports show it: ``sha256:`` and its first 12 hex digits."""
    return fingerprint[:19]


def versions_line(versions: dict[str, str | None]) -> str:
    """A candidate folder's task versions in one line (each fingerprint shortened)."""
    return ", ".join(f"{t} {short(fp) if fp else '(does not load)'}" for t, fp in versions.items())
