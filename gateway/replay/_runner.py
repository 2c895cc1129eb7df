"""Run a replay: validate the whole selection first, then replay and record each request.

    replayer = Replayer(store, catalog, Providers(settings))
    prepared = replayer.prepare(Selection(task="compliance_review"), live=True)  # exit-2 errors
    report = replayer.run(prepared, progress=lambda row: ...)

``prepare`` raises before anything is written (unknown request id, missing policy version,
unknown or retired target model, no API key for a live call). ``run`` appends one REPLAY
event per request (``phase: "outcome"``), all under one new run id, each naming the original
request and seq. A live send goes through the gateway's own recorder and providers: it is
preceded by its own REPLAY event (``phase: "intent"``, with the exact wire body) and each
failed attempt is an ATTEMPT_FAILED event under the run id, so no upstream call is made that
the log does not already hold (DESIGN §3, invariant 1). If the intent cannot be appended,
nothing is sent and the AuditWriteError propagates.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from audit import AuditStore, EventDraft, EventKind
from gateway._keys import request_hash_for
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import InputError
from gateway.keys import CacheKey
from gateway.policy import ModelTarget, parse_model_target
from gateway.providers.registry import Providers
from gateway.replay._access import answer_read
from gateway.replay._candidate import Candidate, plan_candidate, reached_model
from gateway.replay._compare import compare_answers
from gateway.replay._diff import json_changes
from gateway.replay._loading import RecordedSet, load_selection
from gateway.replay._migration import Migration, plan_migration
from gateway.replay._model import (
    FieldChange,
    Mode,
    Outcome,
    ReplayReport,
    RequestReplay,
    TaskTally,
    summarise,
)
from gateway.replay._recorded import (
    Recorded,
    Selection,
    experiments_left_out,
    recorded_requested,
    recorded_user_id,
    request_body,
)
from gateway.replay._recording import Call, Row, event_caller, keep_sent, outcome_event, send
from gateway.replay._verify import verify_request
from gateway.request import Recorder, Replied, Sent
from gateway.settings import Settings

Progress = Callable[[RequestReplay], None]
BATCH = 256  # outcome events per transaction in a run that sends nothing upstream
UNASKED = frozenset({"$.model", "$.stream"})  # body fields a migration's changes leave out


@dataclass(frozen=True)
class PreparedRun:
    mode: Mode
    target: ModelTarget | None  # --model: the model, and where it is reached
    requests: RecordedSet
    experiments_left_out: int = 0  # experiment requests the filters matched and left out
    include_failed: bool = False  # live: also re-send requests whose original call failed
    candidate: Candidate | None = None  # --policies DIR: the proposed policy folder


def _failed_original(prepared: PreparedRun, recorded: Recorded) -> bool:
    """A live run leaves out a request that reached the provider and got no answer."""
    return (
        prepared.mode.sends
        and not prepared.include_failed
        and recorded.request is not None
        and recorded.response is None
        and recorded.skip is None
    )


class Replayer:
    def __init__(
        self,
        store: AuditStore,
        catalog: Catalog,
        providers: Providers | None = None,
        *,
        operator: str | None = None,
        today: date | None = None,
        recorder: Recorder | None = None,
        cache_key: CacheKey | None = None,
    ) -> None:
        self.store = store
        # ``cache_key``: keyed request hashes are re-made under it (a recorder has its own).
        self.recorder = recorder if recorder is not None else Recorder(store, cache_key=cache_key)
        # Who runs the replay: its events are theirs (the replayed request's caller is kept
        # as ``original_caller``); without one, they are recorded under that caller.
        self.operator = operator
        self.catalog = catalog
        # Without providers configured, only what needs no credentials can be called.
        self.providers = providers or Providers(Settings())
        self.today = today or date.today()
        self._verify_models: dict[str, ModelInfo] = {}

    # -- validation: nothing is written before this has passed ---------------------------------

    def prepare(
        self,
        selection: Selection,
        *,
        live: bool = False,
        model: str | None = None,
        policies: Path | None = None,
    ) -> PreparedRun:
        """``policies``: a candidate policy folder to replay under (``--policies DIR``)."""
        target = self._target(model, live=live) if model is not None else None
        candidate = None
        if policies is not None:
            candidate = Candidate.load(policies, self.catalog, today=self.today)
        requests = load_selection(self.store, selection)
        if candidate is not None:
            mode = Mode.POLICIES_LIVE if live else Mode.POLICIES
        elif target is not None:
            mode = Mode.MODEL_LIVE if live else Mode.MODEL
        else:
            mode = Mode.LIVE if live else Mode.VERIFY
        for name in self._providers_needed(mode, target, requests, candidate):
            self.providers.get(name)  # a missing key stops here, before anything is recorded
        return PreparedRun(
            mode=mode,
            target=target,
            requests=requests,
            experiments_left_out=experiments_left_out(self.store, selection),
            include_failed=selection.include_failed,
            candidate=candidate,
        )

    def _target(self, text: str, *, live: bool) -> ModelTarget:
        """``--model``'s target (``[TRANSPORT:]ID[@REGION]``); a live run must send to the
        region it names, as a policy's region is a mandate."""
        target = parse_model_target(text, self.catalog)
        info = target.model
        if info.lifecycle == "retired":
            raise InputError(
                f"model {info.id!r} is retired, so no request can move to it.",
                hint="Choose an active model from 'gateway models list'.",
            )
        provider = target.reached.provider
        configured = self.providers.region(provider)
        if live and target.region is not None and configured != target.region:
            raise InputError(
                f"--model {text!r} names region {target.region!r}, but the gateway sends "
                f"{provider} requests to {configured or 'no region'}; nothing was sent.",
                hint=f"Set the {provider} region setting to {target.region!r} for this run.",
            )
        return target

    def _providers_needed(
        self,
        mode: Mode,
        target: ModelTarget | None,
        requests: RecordedSet,
        candidate: Candidate | None,
    ) -> set[str]:
        """The providers this run will call, so that one that cannot be built (no API key)
        stops the run before anything is recorded."""
        if mode is Mode.POLICIES_LIVE and target is None and candidate is not None:
            needed = set()
            for r in requests:
                policy = candidate.policy(r.first.task)
                if r.request is not None and not isinstance(policy, str):
                    reached = reached_model(policy, self.catalog, r.model_id)
                    needed |= set() if isinstance(reached, str) else {reached.provider}
            return needed
        if mode in (Mode.MODEL_LIVE, Mode.POLICIES_LIVE):
            return {target.reached.provider} if target is not None and requests else set()
        if mode is Mode.LIVE:
            return {
                str(r.request.data.get("provider"))
                for r in requests
                if r.request is not None and self._retired_reason(r) is None
            }
        return set()

    # -- the run -------------------------------------------------------------------------------

    def run(
        self, prepared: PreparedRun, progress: Progress | None = None, *, keep_rows: bool = True
    ) -> ReplayReport:
        """``progress(row)`` after each row is recorded. ``keep_rows=False``: the report holds
        the summary only (a caller that streams the rows through ``progress`` keeps memory
        flat however many requests the run covers)."""
        run_id = "replay_" + uuid.uuid4().hex
        rows: list[RequestReplay] = []
        counts: Counter[Outcome] = Counter()
        tasks = TaskTally()
        models: set[str] = set()
        # Verify and --model runs send nothing upstream, so nothing must be on the log before
        # their outcome: those are appended BATCH at a time (a row is reported once its event
        # is committed). A live send's outcome is committed on its own, right after the call.
        batch = 1 if prepared.mode.sends else BATCH
        # Each row with the events that record it: its REPLAY outcome first, then the ACCESS
        # of the recorded answer it shows, if it shows one (committed before it is reported).
        pending: list[tuple[RequestReplay, list[EventDraft]]] = []

        def flush() -> None:
            appended = iter(self.recorder.append_many([d for _, ds in pending for d in ds]))
            for row, drafts in pending:
                events = [next(appended) for _ in drafts]
                done = row.model_copy(update={"replay_seq": events[0].seq})
                counts[done.outcome] += 1
                tasks.add(done)
                if done.model_id:
                    models.add(done.model_id)
                if keep_rows:
                    rows.append(done)
                if progress is not None:
                    progress(done)
            pending.clear()

        failed_left_out = 0
        for recorded in prepared.requests:
            if _failed_original(prepared, recorded):
                failed_left_out += 1
                continue
            built = self._replay_one(run_id, prepared, recorded)
            caller = event_caller(self.operator, recorded.first)
            target = prepared.target.label if prepared.target else None
            row, draft = outcome_event(
                run_id, prepared.mode, target, recorded, built, caller=caller
            )
            read = None
            if row.recorded_answer is not None:
                read = answer_read(run_id, recorded, reader=caller)
            pending.append((row, [draft] if read is None else [draft, read]))
            if len(pending) >= batch:
                flush()
        if pending:
            flush()
        return ReplayReport(
            summary=summarise(prepared.mode, run_id, counts),
            requests=tuple(rows),
            experiments_left_out=prepared.experiments_left_out,
            failed_originals_left_out=failed_left_out,
            recorded_models=tuple(sorted(models)),
            target=prepared.target.label if prepared.target else None,
            tasks=tasks.summaries(),
            candidate=str(prepared.candidate.folder) if prepared.candidate else None,
            candidate_versions=prepared.candidate.versions() if prepared.candidate else {},
        )

    def _replay_one(self, run_id: str, prepared: PreparedRun, recorded: Recorded) -> Row:
        # Verify's checks are offline (re-plan, hashes, bodies, digests), so they run on a
        # record of provider-run tools too; only re-sending it depends on the outside world.
        verifiable = prepared.mode is Mode.VERIFY and recorded.checkable
        erasure = next((e for e in recorded.events if e.kind is EventKind.ERASURE), None)
        if erasure is not None:  # counted apart from failures: audit verify checks the erasure
            reason = f"content erased by policy (event seq {erasure.seq})"
            return Row({"outcome": Outcome.ERASED, "reason": reason})
        if recorded.skip is not None and not verifiable:
            return Row({"outcome": Outcome.SKIPPED, "reason": recorded.skip})
        row = Row({}, policy=recorded.policy)
        row.request_hash = recorded.request.request_hash if recorded.request else None
        if prepared.mode is Mode.VERIFY:
            checks = verify_request(
                self.store, self.catalog, recorded, self._verify_models, self.recorder.cache_key
            )
            failed = [c for c in checks if not c.ok]
            row.fields = {
                "outcome": Outcome.FAILED if failed else Outcome.PASSED,
                "reason": f"{failed[0].name}: {failed[0].detail}" if failed else None,
                "checks": checks,
            }
            return row
        if prepared.mode is Mode.LIVE:
            return self._live(run_id, recorded, row)
        return self._migrate(run_id, prepared, recorded)

    def _retired_reason(self, recorded: Recorded) -> str | None:
        model_id = recorded.model_id
        info = self.catalog.get(model_id) if model_id else None
        if info is None:
            return f"model {model_id!r} is no longer in the model catalog, so it cannot be called."
        if info.lifecycle == "retired":
            when = f" on {info.retires_at.isoformat()}" if info.retires_at else ""
            return (
                f"model {model_id!r} was retired{when}; the provider no longer serves it. "
                "Replay it on a current model with --model ID --live."
            )
        return None

    def _live(self, run_id: str, recorded: Recorded, row: Row) -> Row:
        request = recorded.request
        assert request is not None
        retired = self._retired_reason(recorded)
        body = request_body(self.store, recorded)
        if retired is not None or body is None:
            row.fields = {
                "outcome": Outcome.SKIPPED,
                "reason": retired or "the recorded request body is not readable.",
            }
            return row
        call = Call(
            run_id=run_id,
            mode=Mode.LIVE,
            recorded=recorded,
            target=None,
            provider=str(request.data.get("provider")),
            api_version=str(request.data["api_version"]),
            policy=row.policy,
            request_hash=row.request_hash,
        )
        sent = self._send(call, body, row)
        row.fields = compare_answers(
            self.store, self.catalog, recorded, sent, recorded.model_id, self.recorder.signature
        )
        if isinstance(sent, Replied):
            current = self.providers.model_version(call.provider, str(request.data.get("model_id")))
            if current != request.data.get("model_version"):
                row.fields["reason"] = "the model's version changed since the recording."
        keep_sent(row, sent)
        return row

    def _plan(
        self,
        prepared: PreparedRun,
        recorded: Recorded,
        body: dict[str, Any],
        requested: dict[str, Any],
    ) -> Migration:
        """The request re-planned for the --model target, or under the candidate folder."""
        request = recorded.request
        assert request is not None and recorded.policy is not None
        messages = body.get("messages")
        if prepared.candidate is not None:
            return plan_candidate(
                prepared.candidate,
                self.catalog,
                task=recorded.first.task,
                recorded_model=recorded.model_id,
                messages=messages,
                requested=requested,
                target=prepared.target,
                caller=request.caller,
                user_id=recorded_user_id(body),
                today=self.today,
                region_of=self.providers.region if prepared.mode.sends else None,
            )
        assert prepared.target is not None
        return plan_migration(
            recorded.policy,
            prepared.target,
            messages,
            requested,
            caller=request.caller,
            user_id=recorded_user_id(body),
            today=self.today,
        )

    def _migrate(self, run_id: str, prepared: PreparedRun, recorded: Recorded) -> Row:
        request = recorded.request
        assert request is not None
        body = request_body(self.store, recorded) or {}
        requested = recorded_requested(self.store, recorded)
        if requested is None:  # re-planned without the caller's parts, it would differ falsely
            return Row(
                {
                    "outcome": Outcome.SKIPPED,
                    "reason": "the recorded overrides (the caller's parts) are not readable.",
                }
            )
        migration = self._plan(prepared, recorded, body, requested)
        row = Row({"findings": migration.findings}, policy=migration.policy)
        plan, reached = migration.plan, migration.reached
        if plan is None or reached is None or migration.policy is None:
            row.fields.update(outcome=Outcome.REFUSED, reason=migration.refusal)
            return row
        version = self.providers.model_version(reached.provider, reached.id)
        row.request_hash = request_hash_for(plan, version, self.recorder.cache_key)
        # Streamed or not is how the answer was delivered, not what was asked: a streamed
        # recording compares with its re-plan as an answer, never as a "$.stream" change.
        changes = [c for c in json_changes(body, plan.body) if c.path not in UNASKED]
        if plan.api_version != request.data.get("api_version"):
            changes.insert(
                0,
                FieldChange(
                    path="api_version",
                    change="changed",
                    recorded=request.data.get("api_version"),
                    replayed=plan.api_version,
                ),
            )
        row.fields["request_changes"] = tuple(changes)
        if not prepared.mode.sends:
            row.fields["outcome"] = Outcome.DIFFERING if changes else Outcome.IDENTICAL
            if changes:
                row.fields["reason"] = f"{len(changes)} change(s) to the request besides the model"
            return row
        call = Call(
            run_id=run_id,
            mode=prepared.mode,
            recorded=recorded,
            target=reached.id,
            provider=reached.provider,
            api_version=plan.api_version,
            policy=row.policy,
            request_hash=row.request_hash,
        )
        sent = self._send(call, plan.body, row)
        row.fields.update(
            compare_answers(
                self.store,
                self.catalog,
                recorded,
                sent,
                reached.id,
                self.recorder.signature,
                policy=migration.policy,
            )
        )
        keep_sent(row, sent)
        return row

    def _send(self, call: Call, body: dict[str, Any], row: Row) -> Sent:
        caller = event_caller(self.operator, call.recorded.first)
        return send(self.recorder, self.providers, call, body, row, caller=caller)
