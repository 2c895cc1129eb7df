"""Worker threads for an event loop's blocking audit work (appends, lookups), so that an fsync
or a SQLite lock wait never runs on the loop.

    threads = AuditThreads()
    appended = await threads.submit(store.append, draft)   # runs now, in a worker thread
    await threads.to_end(store.append, draft)              # finishes even if we are cancelled
    threads.close()                                        # waits for the work in progress

A served call's own events (its intent, failed attempts and outcome) do not come here unless
they are large: they wait in the store's commit queue with no thread (``Recorder.aappend``,
``AuditStore.append_soon``); an outside job (``Job.outside(loop)``, ended by
``job.finish(result, error)`` from the committing thread) is how the loop awaits them.

A job runs to its end whatever happens to its waiter: a cancelled ``await job`` leaves the work
running, and ``await job.settled()`` waits for it again. Each job runs in a copy of the
submitting task's context (so log context variables reach the thread), as with
``asyncio.to_thread``.

Why not ``asyncio.to_thread``: a replayed request makes one or two of these hops on its
critical path (its lookups), and each ``to_thread`` hop wakes a cold thread (the default
executor's threads queue FIFO, so consecutive hops rotate through all of them, and at one
call at a time the pool still grows to its maximum), wraps its coroutine in a task and
chains a concurrent future to an asyncio future, which costs loop iterations on the way
back. Here the most recently idle thread takes the next job directly, and the result comes
back in one ``call_soon_threadsafe``.

Threads start on first use (a sync ``Gateway`` starts none), at most ``max_threads`` at once
(`MAX_THREADS`: one per pooled PostgreSQL connection, less two); jobs beyond that
wait in order. Worker threads are daemons, so a gateway never closed cannot hold the process
open, and an exit handler waits for the work already submitted, as the default executor's
does; a forked child starts its own threads.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

from audit.store.backend import PG_CONNECTIONS

__all__ = ["AuditThreads", "Job"]

R = TypeVar("R")

# An audit thread mostly waits (for the chain lock, a commit, an fsync), so the bound is
# concurrency, not cores: with the old bound (cores + 4: 6 here) a c=32 load queued behind 6
# threads and a commit group never held more than 6 appends (bench/results/throughput.md).
# A served call's events wait in the store's commit queue with no thread
# (AuditStore.append_soon), so it is the other hops (replay look-ups, large records) that
# take these threads. At most one per PostgreSQL connection, less the committer's and one
# for the loop's own store work (the key ring's refresh, readiness): a thread never waits
# for a pooled connection.
MAX_THREADS = PG_CONNECTIONS - 2


class Job(Generic[R]):
    """One piece of work handed to a worker thread; ``await job`` for its result."""

    __slots__ = (
        "_args",
        "_context",
        "_error",
        "_fn",
        "_future",
        "_loop",
        "_on_settled",
        "_result",
        "_settled",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fn: Callable[..., R] | None,
        args: tuple[Any, ...] = (),
    ) -> None:
        self._loop = loop
        self._context = contextvars.copy_context() if fn is not None else None
        self._fn = fn
        self._args = args
        self._future: asyncio.Future[R] = loop.create_future()
        self._result: R | None = None
        self._error: BaseException | None = None
        self._settled = False  # the loop has seen the work end (set on the loop thread only)
        self._on_settled: Callable[[], object] | None = None

    def __await__(self) -> Generator[Any, None, R]:
        return self._future.__await__()

    @property
    def done(self) -> bool:
        """The work has ended and its loop has been told."""
        return self._settled

    def result(self) -> R:
        """The work's result, or its exception raised; only once ``done``."""
        assert self._settled, "the job is still running"
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]  # R, set with _settled

    def failed(self) -> bool:
        return self._settled and self._error is not None

    async def settled(self) -> None:
        """Until the work has ended, however often the waiter is cancelled meanwhile (its
        error, if any, stays in :meth:`result`)."""
        while not self._settled:
            if self._future.done():  # a waiter was cancelled: wait on a fresh future
                self._future = self._loop.create_future()
            try:
                await self._future
            except asyncio.CancelledError:
                continue
            except BaseException:  # noqa: BLE001, S110 - kept for result()
                pass

    def when_settled(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` on the loop once the work has ended (now, if it has): what
        follows work that nobody waits for any more."""
        if self._settled:
            callback()
        else:
            self._on_settled = callback

    @classmethod
    def outside(cls, loop: asyncio.AbstractEventLoop) -> Job[Any]:
        """A job whose work another thread does and ends with :meth:`finish` (an append the
        store's committer commits: ``store.append_soon(draft, job.finish)``)."""
        return cls(loop, None)

    def finish(self, result: R | None, error: BaseException | None) -> None:
        """From any thread: the work ended with ``result`` or ``error``; tell the loop."""
        self._result, self._error = result, error
        self._notify()

    # -- in the worker thread ----------------------------------------------------------------

    def _run(self) -> None:
        assert self._fn is not None and self._context is not None, "outside: see finish()"
        try:
            self._result = self._context.run(self._fn, *self._args)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            self._error = exc

    def _notify(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._deliver)

    # -- back on the loop --------------------------------------------------------------------

    def _deliver(self) -> None:
        self._settled = True
        future = self._future
        if not future.done():  # else its waiter was cancelled; the outcome stays in the job
            if self._error is not None:
                future.set_exception(self._error)
            else:
                future.set_result(self._result)  # type: ignore[arg-type]  # R, set by _run
        if self._on_settled is not None:
            self._on_settled()


class _Slot:
    """An idle worker, woken by the job it is given (``None``: exit)."""

    __slots__ = ("_wake", "job")

    def __init__(self) -> None:
        self._wake = threading.Lock()
        self._wake.acquire()
        self.job: Job[Any] | None = None

    def give(self, job: Job[Any] | None) -> None:
        self.job = job
        self._wake.release()

    def wait(self) -> Job[Any] | None:
        self._wake.acquire()
        return self.job


class AuditThreads:
    """See the module docstring. One per gateway; safe to submit to from any loop."""

    def __init__(self, max_threads: int | None = None) -> None:
        self._max = max_threads or MAX_THREADS
        self._lock = threading.Lock()
        self._idle: list[_Slot] = []  # a stack: the most recently idle thread is the warmest
        self._backlog: deque[Job[Any]] = deque()
        self._threads: set[threading.Thread] = set()
        self._closed = False
        _LIVE.add(self)

    def submit(self, fn: Callable[..., R], *args: Any) -> Job[R]:
        """Start ``fn(*args)`` in a worker thread; await the job for its result."""
        job = Job(asyncio.get_running_loop(), fn, args)
        with self._lock:
            if self._closed:
                raise RuntimeError("the gateway is closed: no more audit work is accepted")
            if self._idle:
                self._idle.pop().give(job)
            elif len(self._threads) < self._max:
                thread = threading.Thread(
                    target=self._work, args=(job,), name="gateway-audit", daemon=True
                )
                self._threads.add(thread)
                thread.start()
            else:
                self._backlog.append(job)
        return job

    async def to_end(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in a worker thread to its end, even if the caller is cancelled
        meanwhile (the work then finishes on its own). Its error is raised to a caller that
        waited for it."""
        job = self.submit(fn, *args)
        try:
            await job
        except asyncio.CancelledError:
            if job.done:
                job.result()
            raise

    def close(self) -> None:
        """Accept no more work; wait for the work submitted so far and for the threads."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            threads = set(self._threads)
        for slot in idle:
            slot.give(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join()

    def _work(self, job: Job[Any] | None) -> None:
        slot = _Slot()
        while job is not None:
            job._run()
            with self._lock:
                following = self._backlog.popleft() if self._backlog else None
                idle = following is None and not self._closed
                if idle:
                    self._idle.append(slot)
            # The waiter is told last, just before this thread blocks: the loop thread it
            # wakes then finds the GIL free instead of waiting for this thread to let go.
            job._notify()
            job = following if following is not None or not idle else slot.wait()
        with self._lock:
            self._threads.discard(threading.current_thread())

    def _after_fork(self) -> None:
        # The parent's threads do not exist in the child: start afresh (jobs queued in the
        # parent belong to the parent's loop).
        self._lock = threading.Lock()
        self._idle = []
        self._backlog.clear()
        self._threads = set()


_LIVE: weakref.WeakSet[AuditThreads] = weakref.WeakSet()


def _close_all() -> None:
    for threads in list(_LIVE):
        threads.close()


def _forget_all() -> None:
    for threads in list(_LIVE):
        threads._after_fork()


# Exit handlers run before daemon threads are stopped: the writes already handed over finish.
atexit.register(_close_all)
os.register_at_fork(after_in_child=_forget_all)
