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
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from gateway._locks import AsyncKeyedLocks, KeyedLocks
from gateway._pipeline import Prepared, RequestPipeline
from gateway._recording import Recorder, Sent
from gateway.catalog import Catalog
from gateway.errors import ConfigurationError
from gateway.offline import offline_policy
from gateway.policy import Policy, PolicySet
from gateway.providers.base import Provider
from gateway.providers.registry import Providers
from gateway.result import Result
from gateway.settings import Settings


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

    def prepare_and_look(
        self,
        task: str,
        prompt: object,
        messages: object,
        caller: object,
        overrides: Mapping[str, object] | None,
    ) -> tuple[Prepared, Result | None]:
        prepared = self.pipeline.prepare(
            task, prompt=prompt, messages=messages, caller=caller, overrides=overrides
        )
        return prepared, self.pipeline.cached_result(prepared)

    def provider(self, prepared: Prepared) -> Provider:
        return self.providers.get(prepared.plan.provider)

    def run(self, prepared: Prepared) -> Result:
        """Intent, call, outcome: the whole miss path, synchronously."""
        sent = self.recorder.send(
            prepared.labels,
            self.provider(prepared),
            prepared.plan.body,
            api_version=prepared.plan.api_version,
            intent=self.pipeline.intent(prepared),
        )
        return self.finish(prepared, sent)

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
        # Hits need no lock; a miss takes the per-request lock and looks again, so that
        # concurrent identical misses make one upstream call and the rest are served from it.
        prepared, cached = core.prepare_and_look(task, prompt, messages, caller, overrides)
        if cached is not None:
            return cached
        if prepared.plan.cache_mode != "replay":
            return core.run(prepared)
        with self._locks.hold(prepared.request_hash):
            cached = core.pipeline.cached_result(prepared)
            return cached if cached is not None else core.run(prepared)

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
        # One hop to a worker thread for everything up to the cache lookup (audit reads and
        # writes block), then the same locking as Gateway.complete.
        prepared, cached = await asyncio.to_thread(
            core.prepare_and_look, task, prompt, messages, caller, overrides
        )
        if cached is not None:
            return cached
        if prepared.plan.cache_mode != "replay":
            return await self._call(prepared)
        async with self._locks.hold(prepared.request_hash):
            cached = await asyncio.to_thread(core.pipeline.cached_result, prepared)
            return cached if cached is not None else await self._call(prepared)

    async def _call(self, prepared: Prepared) -> Result:
        core = self._core
        sent = await core.recorder.asend(
            prepared.labels,
            core.provider(prepared),
            prepared.plan.body,
            api_version=prepared.plan.api_version,
            intent=core.pipeline.intent(prepared),
        )
        return await asyncio.to_thread(core.finish, prepared, sent)

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
