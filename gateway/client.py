"""Gateway and AsyncGateway: run one request through policy, audit, cache and provider.

    with Gateway.from_env() as gw:
        r = gw.complete("compliance_review", "Transaction: ...", caller="payments-svc")
        print(r.text, r.seq)

One instance is safe to share across the threads of a web service (``Gateway``) or the tasks
of one event loop (``AsyncGateway``). Concurrent identical requests under a ``replay`` policy
make one upstream call per instance: the others wait and are served from the audit log.

``offline=True`` runs every task on the local model (see gateway.offline). ``policy_transform``
derives the policy actually used from the reviewed one (experiments use it to vary sampling);
the derived policy is what the audit log records, with its own fingerprint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from gateway._locks import AsyncKeyedLocks, KeyedLocks
from gateway._pipeline import Prepared, RequestPipeline
from gateway._recording import Begun, Recorder, Sent
from gateway.catalog import Catalog
from gateway.errors import ConfigurationError
from gateway.offline import offline_policy
from gateway.policy import Policy, PolicySet
from gateway.providers.base import Provider
from gateway.providers.registry import Providers
from gateway.result import Result
from gateway.settings import Settings


@dataclass(frozen=True)
class _Step:
    """Where a request stands: served (``cached``), intent committed (``begun``: send now),
    or neither (a replay miss, to be looked up again under its lock)."""

    prepared: Prepared
    cached: Result | None = None
    begun: Begun | None = None

    @property
    def pending(self) -> bool:
        return self.cached is None and self.begun is None


class _Core:
    """What both clients share: settings, catalog, policies, the recorder, the providers."""

    def __init__(
        self, settings: Settings, *, offline: bool, policy_transform: PolicyTransform | None
    ) -> None:
        self.settings = settings
        self.catalog = Catalog.load(settings.catalog_override)
        self.policies = PolicySet.load(Path(settings.policy_dir), self.catalog)
        self.recorder = Recorder.open(settings)
        self.store = self.recorder.store
        self.providers = Providers(settings)
        transform = _compose(offline_policy if offline else None, policy_transform)
        self.pipeline = RequestPipeline(
            policies=self.policies,
            catalog=self.catalog,
            recorder=self.recorder,
            providers=self.providers,
            durability=str(settings.durability),
            default_caller=settings.default_caller,
            policy_transform=transform,
        )
        # A service pays each provider's start-up (the SDK's import: about a second) now,
        # rather than on its first request.
        self.providers.warm(self._providers_in_use(transform))

    def _providers_in_use(self, transform: PolicyTransform | None) -> set[str]:
        names: set[str] = set()
        for policy in self.policies.policies():
            model = self.catalog.get((transform(policy) if transform else policy).model_id)
            if model is not None:
                names.add(model.provider)
        return names

    # Each method below is one worker-thread hop for AsyncGateway: audit reads and writes
    # block, so they are grouped to make as few hops per request as the locking allows.

    def start(
        self,
        task: str,
        prompt: object,
        messages: object,
        caller: object,
        overrides: Mapping[str, object] | None,
    ) -> _Step:
        """Resolve, plan and key; then serve a recorded answer (replay) or commit the intent
        (record). A replay miss is left pending: it is looked up again under its lock."""
        prepared = self.pipeline.prepare(
            task, prompt=prompt, messages=messages, caller=caller, overrides=overrides
        )
        if prepared.plan.cache_mode == "replay":
            return _Step(prepared, cached=self.pipeline.cached_result(prepared))
        return _Step(prepared, begun=self.begin(prepared))

    def look_or_begin(self, prepared: Prepared) -> _Step:
        """Under the request's lock: an answer recorded meanwhile, or the intent committed."""
        cached = self.pipeline.cached_result(prepared)
        if cached is not None:
            return _Step(prepared, cached=cached)
        return _Step(prepared, begun=self.begin(prepared))

    def provider(self, prepared: Prepared) -> Provider:
        return self.providers.get(prepared.plan.provider)

    def begin(self, prepared: Prepared) -> Begun:
        return self.recorder.begin(
            prepared.labels,
            self.provider(prepared),
            prepared.plan.body,
            self.pipeline.intent(prepared),
        )

    def call(self, prepared: Prepared, begun: Begun) -> Sent:
        return self.recorder.call(
            prepared.labels,
            self.provider(prepared),
            prepared.plan.body,
            api_version=prepared.plan.api_version,
            begun=begun,
        )

    async def acall(self, prepared: Prepared, begun: Begun) -> Sent:
        return await self.recorder.acall(
            prepared.labels,
            self.provider(prepared),
            prepared.plan.body,
            api_version=prepared.plan.api_version,
            begun=begun,
        )

    def finish(self, prepared: Prepared, sent: Sent) -> Result:
        """Record the call's outcome: RESPONSE, or FAILED and the typed error raised."""
        if sent.reply is not None:
            return self.pipeline.record_outcome(prepared, sent.reply, sent.wire)
        error = sent.error
        assert error is not None  # a Sent holds a reply or an error
        self.pipeline.record_failed(prepared, error, detail=sent.detail)
        if sent.cause is error:
            raise error
        raise error from sent.cause

    def close(self) -> None:
        try:
            self.providers.close()
        finally:
            self.store.close()


PolicyTransform = Callable[[Policy], Policy]


def _compose(first: PolicyTransform | None, then: PolicyTransform | None) -> PolicyTransform | None:
    if first is None or then is None:
        return first or then
    return lambda policy: then(first(policy))


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
    ) -> None:
        self.settings = _settings(
            settings,
            policy_dir=policy_dir,
            database_url=database_url,
            anthropic_api_key=anthropic_api_key,
            anthropic_base_url=base_url,
            durability=durability,
            default_caller=default_caller,
        )
        self._core = _Core(self.settings, offline=offline, policy_transform=policy_transform)
        self._init_locks()

    def _init_locks(self) -> None:
        raise NotImplementedError

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
    ) -> Result:
        core = self._core
        # Hits need no lock; a replay miss takes the per-request lock and looks again, so that
        # concurrent identical misses make one upstream call and the rest are served from it.
        step = core.start(task, prompt, messages, caller, overrides)
        if step.pending:
            with self._locks.hold(step.prepared.request_hash):
                return self._complete(core.look_or_begin(step.prepared))
        return self._complete(step)

    def _complete(self, step: _Step) -> Result:
        if step.cached is not None:
            return step.cached
        assert step.begun is not None
        core = self._core
        return core.finish(step.prepared, core.call(step.prepared, step.begun))

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

    Audit writes run in a worker thread so that an fsync never blocks the event loop.
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
    ) -> Result:
        core = self._core
        # The same steps and locking as Gateway.complete, each step one worker-thread hop:
        # a hit or a record-mode miss makes two hops in all, a replay miss three.
        step = await asyncio.to_thread(core.start, task, prompt, messages, caller, overrides)
        if step.pending:
            async with self._locks.hold(step.prepared.request_hash):
                return await self._complete(
                    await asyncio.to_thread(core.look_or_begin, step.prepared)
                )
        return await self._complete(step)

    async def _complete(self, step: _Step) -> Result:
        if step.cached is not None:
            return step.cached
        assert step.begun is not None
        core = self._core
        sent = await core.acall(step.prepared, step.begun)
        return await asyncio.to_thread(core.finish, step.prepared, sent)

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
