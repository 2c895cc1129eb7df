"""What Gateway and AsyncGateway share: the stages of one request that do I/O.

    core = Core(settings, offline=False, policy_transform=None)
    step = core.begin(request)        # Hit (served from the log) | Send | Miss (replay miss)
    result = core.finish(prepared, sent)

``Core`` opens the catalog, policies, recorder and providers once, and takes a request
from its frozen :class:`Request` to a :class:`Hit`, :class:`Send` or :class:`Miss`; a miss
looks again under the request's lock (``looked_again``). The clients (_client) only decide
how the caller waits: threads and locks, or the event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path

from gateway.catalog import Catalog
from gateway.evidence import pinned_for_start, record_refused_tasks, withhold_unapproved
from gateway.policy import Policy, PolicySet
from gateway.providers.base import Provider
from gateway.providers.registry import Providers
from gateway.request._call_types import Failed, Intended, Replied, Sent
from gateway.request._offline import offline_policy
from gateway.request._pipeline import RequestPipeline
from gateway.request._prepared import Hit, Miss, Prepared, Request, Send, Step
from gateway.request._recording import Recorder
from gateway.result import Result
from gateway.settings import Settings

__all__ = ["Core", "PolicyTransform"]


class Core:
    """What both clients share: settings, catalog, policies, the recorder, the providers, and
    the stages that do I/O (``begin``, ``planned`` and ``looked_again`` are one worker-thread
    hop each for AsyncGateway: audit reads block, so they are grouped to make as few hops as
    the locking allows; ``afinish`` and ``acancelled`` record on the loop)."""

    def __init__(
        self,
        settings: Settings,
        *,
        offline: bool,
        policy_transform: PolicyTransform | None,
        providers: Mapping[str, Callable[[Settings], Provider]] | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = Catalog.load(settings.catalog_override)
        self.policies = PolicySet.load(Path(settings.policy_dir), self.catalog)
        approvers = pinned_for_start(settings)  # before the store: a refusal creates nothing
        self.recorder = Recorder.open(settings)
        self.store = self.recorder.store
        try:  # four eyes: with require_approvals = N, an unapproved task is refused, alone
            required, signature = settings.require_approvals, self.recorder.signature
            short = withhold_unapproved(self.store, self.policies, required, approvers, signature)
            record_refused_tasks(self.store, short, required)  # once per start, on the record
        except BaseException:
            self.store.close()
            raise
        self.providers = Providers(settings, overrides=providers)
        transform = _compose(
            functools.partial(offline_policy, catalog=self.catalog) if offline else None,
            policy_transform,
        )
        self.pipeline = RequestPipeline(
            policies=self.policies,
            catalog=self.catalog,
            recorder=self.recorder,
            providers=self.providers,
            durability=str(settings.durability),
            default_caller=settings.default_caller,
            user_id_salt=settings.user_id_salt,
            policy_transform=transform,
            derives_policies=policy_transform is not None,
        )
        self.records = self.pipeline.records
        self.cache = self.pipeline.cache
        # A service pays each provider's start-up (the SDK's import: about a second) now,
        # rather than on its first request.
        in_use = self._providers_in_use(transform)
        self.providers.warm(in_use)

    def _providers_in_use(self, transform: PolicyTransform | None) -> set[str]:
        names: set[str] = set()
        for policy in self.policies.policies():
            model = self.catalog.get((transform(policy) if transform else policy).model.id)
            if model is not None:
                names.add(model.provider)
        return names

    def begin(self, request: Request) -> Step:
        """Resolve, plan and key (a refusal is recorded and raised); then :meth:`planned`."""
        return self.planned(self.pipeline.prepare(request))

    def planned(self, prepared: Prepared) -> Step:
        """Serve a recorded answer (replay: a lookup) or go on to send (record: no I/O here,
        the intent is committed by the provider). A replay miss is a :class:`Miss`."""
        if prepared.plan.cache_mode != "replay":
            return Send(prepared, Intended(self.records.intent(prepared)))
        served = self.cache.lookup(prepared)
        if served is None:
            return Miss(prepared)
        return Hit(prepared, self.records.cache_hit(prepared, served), served.response)

    def looked_again(self, prepared: Prepared) -> Hit | Send:
        """Under a replay miss's lock, so that concurrent identical misses make one upstream
        call: the answer recorded meanwhile, or go on to send. Both clients do this."""
        match self.planned(prepared):
            case Miss():
                return Send(prepared, Intended(self.records.intent(prepared)))
            case Hit() | Send() as step:
                return step

    def provider(self, prepared: Prepared) -> Provider:
        return self.providers.get(prepared.plan.provider)

    def cancelled(self, prepared: Prepared, reason: str, sent: Sent | None) -> None:
        """Record CANCELLED for a call its caller left (whether its answer had arrived)."""
        reply = sent.reply if isinstance(sent, Replied) else None
        self.records.record_cancelled(prepared, reason=reason, reply=reply)

    async def acancelled(self, prepared: Prepared, reason: str, sent: Sent | None) -> None:
        """:meth:`cancelled` for asyncio, recorded even if the caller is cancelled again."""
        reply = sent.reply if isinstance(sent, Replied) else None
        await self.records.arecord_cancelled(prepared, reason=reason, reply=reply)

    def finish(self, prepared: Prepared, sent: Sent) -> Result:
        """Record the call's outcome: RESPONSE, or FAILED and the typed error raised."""
        match sent:
            case Replied(wire=wire, reply=reply):
                return self.records.record_outcome(prepared, reply, wire)
            case Failed(error=error, detail=detail):
                self.records.record_failed(prepared, error, detail=detail)
                sent.raise_error()

    async def afinish(self, prepared: Prepared, sent: Sent) -> Result:
        """:meth:`finish` for asyncio: recorded on the loop where that is bounded work (see
        ``CallRecords.arecord_outcome``). Once begun, the outcome is recorded even if the
        caller is cancelled meanwhile (then the cancellation goes on)."""
        match sent:
            case Replied(wire=wire, reply=reply):
                return await self.records.arecord_outcome(prepared, reply, wire)
            case Failed(error=error, detail=detail):
                await self.records.arecord_failed(prepared, error, detail=detail)
                sent.raise_error()

    def close(self) -> None:
        try:
            self.providers.close()
        finally:
            try:
                self.recorder.threads.close()  # audit writes still running finish first
            finally:
                self.store.close()


PolicyTransform = Callable[[Policy], Policy]


def _compose(first: PolicyTransform | None, then: PolicyTransform | None) -> PolicyTransform | None:
    if first is None or then is None:
        return first or then
    return lambda policy: then(first(policy))
