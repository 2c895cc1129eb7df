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
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from audit import AuditStore
from audit.canonical import canonical_bytes
from audit.errors import AuditStoreError
from gateway._locks import AsyncKeyedLocks, KeyedLocks
from gateway._pipeline import Prepared, RequestPipeline
from gateway.catalog import Catalog
from gateway.errors import (
    AuditError,
    AuditUnavailable,
    ConfigurationError,
    UpstreamError,
    UpstreamRejected,
)
from gateway.offline import offline_policy
from gateway.policy import Policy, PolicySet
from gateway.providers.base import AttemptFailure, ProviderReply
from gateway.providers.local import LocalProvider, LocalRequestError
from gateway.result import Result
from gateway.settings import Settings

if TYPE_CHECKING:
    from gateway.providers.anthropic import AnthropicProvider


class _Core:
    """What both clients share: settings, catalog, policies, the audit store, the providers."""

    def __init__(
        self, settings: Settings, *, offline: bool, policy_transform: PolicyTransform | None
    ) -> None:
        self.settings = settings
        self.offline = offline
        self.catalog = Catalog.load(settings.catalog_override)
        self.policies = PolicySet.load(Path(settings.policy_dir), self.catalog)
        try:
            self.store = AuditStore.open(settings.database_url, durability=settings.durability)
        except AuditStoreError as exc:
            raise AuditUnavailable(exc.message, hint=exc.hint) from exc
        self.local = LocalProvider()
        self._anthropic: AnthropicProvider | None = None
        self._anthropic_lock = threading.Lock()
        self.pipeline = RequestPipeline(
            policies=self.policies,
            catalog=self.catalog,
            store=self.store,
            durability=str(settings.durability),
            local_versions=self.local,
            policy_transform=_compose(offline_policy if offline else None, policy_transform),
        )
        key = settings.anthropic_api_key
        if key is not None and key.get_secret_value() and not offline:
            # Build the provider now, so a service pays the SDK's import (about a second) at
            # start-up rather than on its first request.
            self.anthropic()

    def anthropic(self) -> AnthropicProvider:
        with self._anthropic_lock:  # one provider (and connection pool) per gateway
            return self._anthropic or self._build_anthropic()

    def _build_anthropic(self) -> AnthropicProvider:
        if self._anthropic is None:
            key = self.settings.anthropic_api_key
            if key is None or not key.get_secret_value():
                raise ConfigurationError(
                    "no Anthropic API key is set, so this task cannot reach Claude.",
                    hint="Set ANTHROPIC_API_KEY, or run offline on the local model "
                    "(gateway ask --offline ...).",
                )
            # Imported here: the SDK costs about a second of start-up, which offline runs and
            # commands that never call Claude should not pay.
            from gateway.providers.anthropic import AnthropicProvider

            self._anthropic = AnthropicProvider(
                api_key=key.get_secret_value(),
                base_url=self.settings.anthropic_base_url,
                timeout_s=self.settings.request_timeout_s,
                max_attempts=self.settings.max_attempts,
                retry_after_cap_s=self.settings.retry_after_cap_s,
                backoff_base_s=self.settings.retry_backoff_base_s,
            )
        return self._anthropic

    def wire_bytes(self, provider: str, body: Mapping[str, Any]) -> bytes:
        if provider == "anthropic":
            return self.anthropic().wire_bytes(dict(body))
        return canonical_bytes(body)

    def prepare(
        self,
        task: str,
        prompt: object,
        messages: object,
        caller: object,
        overrides: Mapping[str, object] | None,
    ) -> Prepared:
        return self.pipeline.prepare(
            task,
            prompt=prompt,
            messages=messages,
            caller=caller,
            overrides=overrides,
        )

    def call_local(self, prepared: Prepared, wire: bytes) -> ProviderReply:
        started = time.perf_counter()
        reply = self.local.complete(prepared.plan.body)
        return ProviderReply(
            status=200,
            response=reply.response,
            response_bytes=reply.raw,
            request_bytes=wire,
            upstream_request_id=None,
            latency_ms=(time.perf_counter() - started) * 1000,
            attempts=1,
            rate_limits={},
        )

    def prepare_and_look(
        self,
        task: str,
        prompt: object,
        messages: object,
        caller: object,
        overrides: Mapping[str, object] | None,
    ) -> tuple[Prepared, Result | None]:
        prepared = self.prepare(task, prompt, messages, caller, overrides)
        return prepared, self.pipeline.cached_result(prepared)

    def begin(self, prepared: Prepared) -> bytes:
        """Commit the intent with the exact bytes about to be sent; return those bytes."""
        wire = self.wire_bytes(prepared.plan.provider, prepared.plan.body)
        self.pipeline.record_intent(prepared, wire)
        return wire

    def run(self, prepared: Prepared) -> Result:
        """Intent, call, outcome: the whole miss path, synchronously."""
        wire = self.begin(prepared)
        try:
            if prepared.plan.provider == "local":
                reply = self.call_local(prepared, wire)
            else:
                reply = self.anthropic().send(
                    prepared.plan.body,
                    api_version=prepared.plan.api_version,
                    on_attempt_failed=self.attempt_recorder(prepared),
                )
        except AuditError:
            raise  # an attempt could not be recorded: the gateway already stopped, fail closed
        except Exception as exc:
            error = self.record_call_failure(prepared, exc)
            if error is exc:
                raise
            raise error from exc
        return self.pipeline.record_outcome(prepared, reply, wire)

    def attempt_recorder(self, prepared: Prepared) -> Callable[[AttemptFailure], None]:
        def record(failure: AttemptFailure) -> None:
            self.pipeline.record_attempt_failed(prepared, failure)

        return record

    def record_call_failure(self, prepared: Prepared, exc: Exception) -> UpstreamError:
        """Record the FAILED outcome of a call that raised, as a typed upstream error.

        Whatever went wrong after the intent was committed, the request gets an outcome: a
        provider error as itself, anything else (a local model refusing a body, a bug) as
        UpstreamRejected naming only the exception type, never its text.
        """
        detail = None
        if isinstance(exc, UpstreamError):
            error = exc
        elif isinstance(exc, LocalRequestError):
            # Its message may quote the input, which belongs in the audit log only.
            detail = exc.message
            error = UpstreamRejected(
                "the local model could not honour this request.",
                error_type="local_request_error",
                attempts=1,
                hint="The reason is in the request's FAILED event: gateway audit show ID.",
            )
        else:
            error = UpstreamRejected(
                f"the {prepared.plan.provider} provider failed ({type(exc).__name__}).",
                error_type="provider_error",
                hint="Run with 'gateway --debug' to see the cause.",
            )
        self.pipeline.record_failed(prepared, error, detail=detail)
        return error

    def close(self) -> None:
        try:
            if self._anthropic is not None:
                self._anthropic.close()
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
        if prepared.plan.provider == "local":
            return await asyncio.to_thread(core.run, prepared)  # CPU-bound: one hop for all
        wire = await asyncio.to_thread(core.begin, prepared)
        record = core.attempt_recorder(prepared)

        async def record_off_the_loop(failure: AttemptFailure) -> None:
            # Awaited by the provider before any retry: recorded first, and the loop runs on.
            await asyncio.to_thread(record, failure)

        try:
            reply = await core.anthropic().asend(
                prepared.plan.body,
                api_version=prepared.plan.api_version,
                on_attempt_failed=record_off_the_loop,
            )
        except AuditError:
            raise
        except Exception as exc:
            error = await asyncio.to_thread(core.record_call_failure, prepared, exc)
            if error is exc:
                raise
            raise error from exc
        return await asyncio.to_thread(core.pipeline.record_outcome, prepared, reply, wire)

    async def aclose(self) -> None:
        core = self._core
        if core._anthropic is not None:
            await core._anthropic.aclose()
            core._anthropic = None
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
