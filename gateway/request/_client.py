"""Gateway and AsyncGateway: run one request through policy, audit, cache and provider.

    with Gateway.from_env() as gw:
        r = gw.complete("compliance_review", "Transaction: ...", caller="payments-svc")
        print(r.text, r.seq)
        with gw.stream("risk_report", "Summarise ...", caller="risk-desk") as s:
            for event in s:                    # Messages API stream events, as sent
                ...
        s.result                               # the same Result complete() returns

One instance is safe to share across the threads of a web service (``Gateway``) or the tasks
of one event loop (``AsyncGateway``). Concurrent identical requests under a ``replay`` policy
make one upstream call per instance: the others wait and are served from the audit log.

``offline=True`` runs every task on the local model (see _offline). ``policy_transform``
derives the policy actually used from the reviewed one (experiments use it to vary sampling);
the derived policy is what the audit log records, with its own fingerprint.

Both clients take the same steps (_prepared): ``Core.begin`` resolves, plans and keys
the request, then gives a :class:`Hit` (served from the log), a :class:`Send` (to be sent), or
a :class:`Miss` (a replay miss), which takes the request's lock and looks again
(``Core.looked_again``) before it is sent. Whether a recorded answer may be served is decided
in one place, _served.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from gateway.errors import ConfigurationError
from gateway.policy import PolicySet
from gateway.providers.base import Provider
from gateway.request._call_types import Sent, cancel_reason
from gateway.request._core import Core, PolicyTransform
from gateway.request._locks import AsyncKeyedLocks, KeyedLocks
from gateway.request._prepared import Hit, Miss, Prepared, Refusal, Request, Send, Step
from gateway.request._streams import AsyncOpened, AsyncStream, Opened, Stream, aopened, opened
from gateway.result import Result
from gateway.settings import Settings

S = TypeVar("S", bound=Step)


def _settings(settings: Settings | None, **given: Any) -> Settings:
    if settings is not None:
        if any(v is not None for v in given.values()):
            raise ConfigurationError("pass either settings=... or keyword settings, not both.")
        return settings
    return Settings(**{k: v for k, v in given.items() if v is not None})


class _Client:
    """Construction shared by Gateway and AsyncGateway: settings, then the core."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        policy_dir: str | Path | None = None,
        database_url: str | None = None,
        anthropic_api_key: str | None = None,
        base_url: str | None = None,
        durability: str | None = None,
        default_caller: str | None = None,
        offline: bool = False,
        policy_transform: PolicyTransform | None = None,
        providers: Mapping[str, Callable[[Settings], Provider]] | None = None,
    ) -> None:
        """``providers``: how named providers are built instead of from settings (a test's
        provider that fails in ways the real ones cannot be made to; see Providers)."""
        self.settings = _settings(
            settings,
            policy_dir=policy_dir,
            database_url=database_url,
            anthropic_api_key=anthropic_api_key,
            anthropic_base_url=base_url,
            durability=durability,
            default_caller=default_caller,
        )
        self._core = Core(
            self.settings, offline=offline, policy_transform=policy_transform, providers=providers
        )
        self._init_locks()

    def _init_locks(self) -> None:
        raise NotImplementedError

    @property
    def policies(self) -> PolicySet:  # as served: withheld() lists those lacking approvals
        return self._core.policies

    @classmethod
    def from_env(cls, *, offline: bool = False, **overrides: Any) -> Self:
        return cls(Settings.from_env(**overrides), offline=offline)


class Gateway(_Client):
    """The synchronous gateway. See the module docstring."""

    def _init_locks(self) -> None:
        self._locks = KeyedLocks()

    def complete(
        self,
        task: str,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        caller: str | None = None,
        overrides: Mapping[str, object] | None = None,
        timeout: float | None = None,
        subject: str | None = None,
    ) -> Result:
        """Run one request and return its answer. ``timeout`` (seconds): the longest wait for
        the upstream to answer or between two reads; no retry starts after it (recorded in
        the intent). ``subject``: the data subject the request is about (a customer id),
        recorded as a keyed digest only, for `gateway audit erase --subject`."""
        # Hits need no lock; a replay miss takes the per-request lock and looks again, so that
        # concurrent identical misses make one upstream call and the rest are served from it.
        core = self._core
        step = core.begin(
            Request(task, prompt, messages, caller, overrides, timeout=timeout, subject=subject)
        )
        if isinstance(step, Miss):
            with self._locks.hold(step.prepared.request_hash):
                return self._complete(core.looked_again(step.prepared))
        return self._complete(step)

    def _complete(self, step: Hit | Send) -> Result:
        match step:
            case Hit(result=result):
                return result
            case Send(prepared=prepared, intended=intended):
                core = self._core
                try:
                    sent = core.recorder.call(
                        prepared.labels,
                        core.provider(prepared),
                        prepared.body,
                        api_version=prepared.plan.api_version,
                        intended=intended,
                        timeout_s=prepared.timeout_s,
                    )
                except KeyboardInterrupt as exc:  # the caller left: one terminal outcome still
                    if intended.committed:
                        core.cancelled(prepared, cancel_reason(exc), None)
                    raise
                return core.finish(prepared, sent)

    def stream(
        self,
        task: str,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        caller: str | None = None,
        overrides: Mapping[str, object] | None = None,
        timeout: float | None = None,
        subject: str | None = None,
    ) -> Stream:
        """A streamed request: ``with gw.stream(...) as s: for event in s: ...``, then
        ``s.result``. See _streams for what happens on each way out."""

        def open_stream(stack: ExitStack) -> Opened:
            core = self._core
            step = core.begin(
                Request(task, prompt, messages, caller, overrides, True, timeout, subject=subject)
            )
            if isinstance(step, Miss):  # a replay miss streams under its lock (see complete)
                stack.enter_context(self._locks.hold(step.prepared.request_hash))
                step = core.looked_again(step.prepared)
            return opened(step, core.recorder, core.records, core.provider)

        return Stream(open_stream)

    def count_tokens(
        self,
        task: str,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        caller: str | None = None,
    ) -> int:
        """Input tokens the provider counts for the request ``task`` would send: a pre-flight
        check, not a model call (recorded as TOKEN_COUNT, since the content leaves the bank)."""
        return self._core.pipeline.count_tokens(
            task, prompt=prompt, messages=messages, caller=caller
        )

    def close(self) -> None:
        self._core.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncGateway(_Client):
    """The asyncio gateway: the same stages and records as ``Gateway``, awaited.

    No fsync or SQLite lock wait blocks the event loop: audit reads run in the gateway's
    worker threads (_threads), and a call's events are drafted on the loop (bounded work) and
    committed by the store's committing thread, or, when large, drafted in a worker thread.
    """

    def _init_locks(self) -> None:
        self._locks = AsyncKeyedLocks()

    async def complete(
        self,
        task: str,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        caller: str | None = None,
        overrides: Mapping[str, object] | None = None,
        timeout: float | None = None,
        on_request_id: Callable[[str], object] | None = None,
        subject: str | None = None,
    ) -> Result:
        """``Gateway.complete`` for asyncio. Cancelled (or timed out by ``asyncio.timeout`` or
        ``wait_for``) after its intent and before its answer, it records CANCELLED; once the
        answer is in, its outcome is recorded all the same before the cancellation goes on.
        ``on_request_id`` is told the request's id as soon as it is planned, so a caller that
        cancels the call can still name its audit record."""
        # The same steps and locking as Gateway.complete. A record-mode miss makes no
        # worker-thread hop: its intent and its outcome join the store's group commit from the
        # loop (Recorder.aappend). A hit makes one hop in all (its lookup and CACHE_HIT), a
        # replay miss two (its lookup, then the look again under its lock).
        request = Request(
            task, prompt, messages, caller, overrides, timeout=timeout, subject=subject
        )
        step = await self._begin(request, told=on_request_id)
        if isinstance(step, Miss):
            async with self._locks.hold(step.prepared.request_hash):
                return await self._complete(
                    await self._step(self._core.looked_again, step.prepared)
                )
        return await self._complete(step)

    async def _begin(self, request: Request, *, told: Callable[[str], object] | None) -> Step:
        """:meth:`Core.begin` for asyncio: planned on the loop where that needs no I/O
        (then a record-mode miss makes no hop before the provider's), else in one hop: a
        request whose model has a version beyond its id (a local model's weights, which
        finding may load) is planned again in a worker thread."""
        core = self._core
        admitted = core.pipeline.admit(request, versions=False)
        if admitted is None:
            return await self._step(core.begin, request, told=told)
        if isinstance(admitted, Refusal):
            await core.recorder.threads.to_end(core.pipeline.refuse, admitted)
            raise admitted.error  # refuse() raised it in the worker thread
        if admitted.plan.cache_mode == "replay":
            return await self._step(core.planned, admitted, told=told)
        if told is not None:
            told(admitted.request_id)
        return core.planned(admitted)

    async def _step(
        self,
        stage: Callable[[Any], S],
        given: Request | Prepared,
        *,
        told: Callable[[str], object] | None = None,
    ) -> S:
        """One worker-thread hop of ``stage``. A cancellation meanwhile cannot stop the
        thread, so it is waited for (a hit's CACHE_HIT it commits is the request's record);
        no stage commits an intent (the provider does, just before it sends), so a cancelled
        Send sent nothing and has no outcome to record. ``told``: given the request id once
        known."""
        threads = self._core.recorder.threads
        job = threads.submit(stage, given)
        try:
            step: S = await job
        except asyncio.CancelledError:
            await job.settled()
            if job.failed():
                raise
            if told is not None:
                told(job.result().prepared.request_id)
            raise
        if told is not None:
            told(step.prepared.request_id)
        return step

    async def _complete(self, step: Hit | Send) -> Result:
        match step:
            case Hit(result=result):
                return result
            case Send(prepared=prepared, intended=intended):
                core = self._core
                sent: Sent | None = None
                try:
                    sent = await core.recorder.acall(
                        prepared.labels,
                        core.provider(prepared),
                        prepared.body,
                        api_version=prepared.plan.api_version,
                        intended=intended,
                        timeout_s=prepared.timeout_s,
                    )
                    # Begun with no await before it, the answer's outcome is the call's one:
                    # a cancellation meanwhile waits for it to be recorded, and goes on.
                    return await core.afinish(prepared, sent)
                except asyncio.CancelledError as exc:
                    # Cancelled before its intent was committed, a call sent nothing.
                    if intended.committed and sent is None:
                        await core.acancelled(prepared, cancel_reason(exc), None)
                    raise

    def stream(
        self,
        task: str,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        caller: str | None = None,
        overrides: Mapping[str, object] | None = None,
        timeout: float | None = None,
        on_request_id: Callable[[str], object] | None = None,
        subject: str | None = None,
    ) -> AsyncStream:
        """``Gateway.stream`` for asyncio: ``async with agw.stream(...) as s: async for event
        in s: ...``, then ``s.result``. ``on_request_id``: as for :meth:`complete`."""

        async def open_stream(stack: AsyncExitStack) -> AsyncOpened:
            core = self._core
            request = Request(
                task, prompt, messages, caller, overrides, True, timeout, subject=subject
            )
            step = await self._begin(request, told=on_request_id)
            if isinstance(step, Miss):  # a replay miss streams under its lock (see complete)
                await stack.enter_async_context(self._locks.hold(step.prepared.request_hash))
                step = await self._step(core.looked_again, step.prepared)
            return aopened(step, core.recorder, core.records, core.provider)

        return AsyncStream(open_stream)

    async def count_tokens(
        self,
        task: str,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        caller: str | None = None,
    ) -> int:
        """:meth:`Gateway.count_tokens`, with its audit work off the event loop."""
        count = functools.partial(
            self._core.pipeline.count_tokens, task, prompt=prompt, messages=messages, caller=caller
        )
        tokens: int = await self._core.recorder.threads.submit(count)
        return tokens

    async def aclose(self) -> None:
        core = self._core
        await core.providers.aclose()
        await asyncio.to_thread(core.close)

    async def __aenter__(self) -> AsyncGateway:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
