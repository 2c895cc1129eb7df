"""What one server process holds, opened in the lifespan and closed after the last request.

    state = await ServerState.open(settings)     # gateway, caller keys, policies
    with state.tracking():                       # a request's gateway call, counted in flight
        result = await state.gateway.complete(...)
    state.track(task) ... state.untrack(task)    # a stream: from its intent to its outcome
    await state.close()                          # waits for those calls (the grace period)

Each worker process opens its own state after uvicorn started it (the audit store is
fork-safe, and nothing is opened before the fork). The task of a request whose gateway call
is running is tracked, a stream's until its outcome is recorded (after its last event went
out), so a shutdown waits for it before it closes the gateway; one cancelled past the grace
period (or past its time-out) is recorded CANCELLED by the gateway.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audit.store import sqlite_path
from gateway._log import log
from gateway.callers import CallerKeys, KeyRing
from gateway.catalog import Catalog
from gateway.errors import GatewayError
from gateway.policy import PolicySet
from gateway.request import AsyncGateway
from gateway.server._auth import Authenticator
from gateway.settings import Settings

__all__ = ["ServerState"]


@dataclass
class ServerState:
    settings: Settings
    gateway: AsyncGateway
    keys: CallerKeys
    auth: Authenticator
    # The policies the server routes, lists and plans count_tokens with: the gateway's own,
    # so a task or routing table it withholds (lacking approvals) is withheld here too.
    policies: PolicySet
    catalog: Catalog
    started_at: datetime
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)
    # Every HTTP request's task while it runs, and how many the shutdown cancelled
    # (gateway.server._drain).
    serving: set[asyncio.Task[Any]] = field(default_factory=set)
    cancelled_at_shutdown: int = 0
    _refresher: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, settings: Settings) -> ServerState:
        gateway = await asyncio.to_thread(AsyncGateway, settings)
        try:
            keys = await asyncio.to_thread(CallerKeys.open, settings)
            ring = KeyRing(keys)
            active = await asyncio.to_thread(ring.refresh)
            catalog = Catalog.load(settings.catalog_override)
            policies = gateway.policies  # as it serves them: unapproved ones withheld
        except BaseException:
            await gateway.aclose()
            raise
        state = cls(
            settings=settings,
            gateway=gateway,
            keys=keys,
            auth=Authenticator(ring, refresh_s=settings.server_key_refresh_s),
            policies=policies,
            catalog=catalog,
            started_at=datetime.now(UTC),
        )
        state._refresher = asyncio.create_task(state.auth.keep_fresh())
        log.info(
            "server_started",
            pid=os.getpid(),
            tasks=len(policies.policies()),
            caller_keys=active,
            database=settings.database_url_masked,
        )
        return state

    @contextmanager
    def tracking(self) -> Iterator[None]:
        """Count the current request's task in flight while its gateway call runs: the call
        runs in the request's own task (a task of its own would cost a task and a loop turn
        per request, and cancelling the request would cancel it all the same)."""
        task = asyncio.current_task()
        assert task is not None
        self.track(task)
        try:
            yield
        finally:
            self.untrack(task)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Count ``task`` in flight until :meth:`untrack`: for a stream, whose gateway call
        outlives its route function (the response streams on after it returned)."""
        self.inflight.add(task)

    def untrack(self, task: asyncio.Task[Any]) -> None:
        self.inflight.discard(task)

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
        # By now uvicorn has waited for the connections and cancelled what was left; what
        # is still tracked is a call recording its outcome (a cancelled stream closing its
        # upstream and writing CANCELLED): the gateway must stay open until it has.
        # A request uvicorn cancelled at the drain deadline is still answering (its 503):
        # waited for too, so that the count below is whole.
        pending = self.inflight | self.serving
        if pending:
            log.info("server_draining", inflight=len(pending))
            _done, late = await asyncio.wait(pending, timeout=self.settings.server_shutdown_grace_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=5.0)
        if self.cancelled_at_shutdown:
            # The one line of a shutdown that cut requests off (uvicorn's own is dropped).
            log.warning(
                "server_requests_cancelled",
                pid=os.getpid(),
                cancelled=self.cancelled_at_shutdown,
                reason="still running at the end of the drain time",
                drain_s=self.settings.server_shutdown_grace_s,
                recorded="CANCELLED",
            )
        try:
            await self.gateway.aclose()
        finally:
            await asyncio.to_thread(self.keys.close)
        log.info("server_stopped", pid=os.getpid())

    async def ready(self) -> list[str]:
        """What keeps this process from serving; empty when it is ready."""
        problems = []
        if not self.policies.policies():
            problems.append("no policy loaded")
        try:
            await asyncio.to_thread(self.keys.head_seq)
        except GatewayError as exc:
            problems.append(f"audit store: {exc.message}")
        else:
            path = sqlite_path(self.settings.database_url)
            if path is not None and not _writable(path):
                problems.append(f"audit store: {str(path)!r} is not writable")
        return problems


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
