"""Group commit: appends that wait for the chain lock are committed together.

    committer = GroupCommitter(commit_batch, retry_alone=item_specific)
    result = committer.submit(item)              # from any thread; blocks until durable
    committer.submit_soon(item, done)            # returns at once; done(result, error) later
    committer.close()                            # stops the committer thread (if started)

``commit_batch(list[item]) -> list[result]`` commits a batch or raises. The first thread in
becomes the leader and commits everything queued so far in one transaction (one fsync).
Threads that arrive meanwhile queue up; when the leader is done it hands leadership to the
oldest waiter, which commits the next batch.

``submit_soon`` is for a caller that must not block (an event loop): its item joins the same
queue with no thread waiting on it, and ``done(result, error)`` is called once the item is
durable or has failed, in whichever thread committed it (the caller hands the outcome back to
its loop: ``loop.call_soon_threadsafe``). Such items are led by one committer thread, started
on first use: when a batch ends and the oldest waiter has no thread of its own, the committer
thread commits the next batch. So a loop with 32 requests in flight needs one thread for its
commits, not 32; the batches, their order and each caller's answer after its own commit are
the same as with ``submit``.

If a batch fails with an error that ``retry_alone(error)`` says belongs to one item (an
integrity error, an invalid event), each item is retried alone, so one bad item cannot fail
the others. Any other error (lock timeout, I/O, disk full, lost connection) would fail every
retry the same way, each after its own wait, so it fails the whole batch at once; it also
ends a round of retries early. Whatever happens, every waiter of a batch is released: an
interrupt (``BaseException``) surfaces in the leader's thread and, through
``interrupted(exc)``, in every waiter whose item had no outcome yet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["MAX_BATCH", "Done", "GroupCommitter"]

T = TypeVar("T")
R = TypeVar("R")

MAX_BATCH = 256  # bounds one transaction's size and the leader's lock hold time

# A submit_soon caller's outcome: (result, None) once durable, or (None, error).
Done = Callable[[R | None, BaseException | None], None]


class _Pending(Generic[T, R]):
    __slots__ = ("done_cb", "error", "event", "item", "result")

    def __init__(self, item: T, done: Done[R] | None = None) -> None:
        self.item = item
        # A thread waits on its event; a submit_soon item has its callback instead.
        self.event = threading.Event() if done is None else None
        self.done_cb = done
        self.result: R | None = None
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None

    def release(self) -> None:
        """Tell the submitter (its outcome is set, or it is to lead: only a thread leads)."""
        if self.event is not None:
            self.event.set()
        elif self.done_cb is not None and self.done:
            done, self.done_cb = self.done_cb, None  # exactly once
            done(self.result, self.error)


class _Wake:
    """The committer thread's wake-up: a bare lock held while nobody has called ``set``
    (``threading.Event`` and ``Semaphore`` are Python-level conditions: a lock allocated
    and a few calls more per wait). Set under the committer's ``_lock``; several sets before
    a ``wait`` make one wake-up, which is all the committer needs (it reads
    ``_soon_leads`` once awake)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        if self._lock.locked():
            self._lock.release()

    def wait(self) -> None:
        self._lock.acquire()


def _always(_exc: BaseException) -> bool:
    return True


def _same(exc: BaseException) -> BaseException:
    return exc


class GroupCommitter(Generic[T, R]):
    def __init__(
        self,
        commit_batch: Callable[[list[T]], list[R]],
        *,
        retry_alone: Callable[[Exception], bool] = _always,
        interrupted: Callable[[BaseException], BaseException] = _same,
    ) -> None:
        self._commit_batch = commit_batch
        self._retry_alone = retry_alone
        self._interrupted = interrupted
        self._lock = threading.Lock()
        self._queue: list[_Pending[T, R]] = []
        self._busy = False
        self._leading = 0  # items in the batch being committed
        self.batches = 0  # for the benchmark: appends / batches = mean group size
        # The committer thread of submit_soon items (started on first use) and its wake-up.
        self._thread: threading.Thread | None = None
        self._wake = _Wake()
        self._soon_leads = False  # the committer thread is to lead the next batch
        self._closed = False

    def after_fork(self) -> None:
        """In a forked child: nobody is committing or waiting (those threads stayed in the
        parent), and the lock may have been held by one of them at the fork."""
        self._lock = threading.Lock()
        self._queue = []
        self._busy = False
        self._leading = 0
        self._thread = None
        self._wake = _Wake()
        self._soon_leads = False

    def close(self) -> None:
        """Stop the committer thread once the items queued so far are committed; items
        submitted with ``submit_soon`` afterwards fail. ``submit`` still works (its own
        thread leads)."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._wake.set()  # an idle committer thread wakes to see it is closed
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def submit_soon(self, item: T, done: Done[R]) -> None:
        """Queue ``item`` without waiting; ``done(result, error)`` is called once it is
        durable (or has failed), from the thread that committed it."""
        mine: _Pending[T, R] = _Pending(item, done)
        with self._lock:
            if self._closed:
                closed = RuntimeError("the audit store is closed: no more appends")
            else:
                closed = None
                self._queue.append(mine)
                if not self._busy:
                    self._busy = True
                    self._lead_soon()
        if closed is not None:
            done(None, closed)

    def _lead_soon(self) -> None:
        """Have the committer thread lead the next batch (under ``_lock``)."""
        self._soon_leads = True
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._commit_loop, name="audit-committer", daemon=True
            )
            self._thread.start()
        self._wake.set()

    def waiting(self) -> int:
        """Items not yet told their outcome: queued, or in the batch being committed."""
        with self._lock:
            return len(self._queue) + self._leading

    def _take(self) -> tuple[list[_Pending[T, R]], list[_Pending[T, R]]]:
        """The next batch and what stays queued (under ``_lock``)."""
        batch = self._queue[:MAX_BATCH]
        self._leading = len(batch)
        return batch, self._queue[MAX_BATCH:]

    def _hand_over(self) -> None:
        """The batch is done: the oldest waiter leads the next one, or nobody is busy (under
        ``_lock``). A thread waiting in ``submit`` leads itself; a ``submit_soon`` item
        has the committer thread lead for it."""
        self._leading = 0
        if not self._queue:
            self._busy = False
            if self._closed:
                self._wake.set()  # a committer kept for a batch a thread led may stop now
        elif self._queue[0].event is not None:
            self._queue[0].event.set()  # it is not done, so it leads
        else:
            self._lead_soon()

    def _commit_loop(self) -> None:
        # Only a batch handed to it is led here (``_soon_leads``): a wake-up from close() or
        # a token left over never makes a second leader beside a thread in ``submit``. The
        # state is read before every wait, never only after one: several sets make one
        # wake-up, so a close() whose set fell in with a batch's would otherwise be missed
        # (the thread waited for ever after that batch, and close() for the thread).
        while True:
            with self._lock:
                if self._soon_leads:
                    self._soon_leads = False
                    batch, self._queue = self._take()
                    if not batch:
                        self._hand_over()  # nothing left to lead: nobody is busy
                elif self._closed and not self._busy:  # nothing queued, none leading
                    self._thread = None
                    return
                else:
                    batch = []
            if not batch:
                self._wake.wait()
                continue
            try:
                self._run(batch)
            except BaseException:  # noqa: BLE001, S110 - every item of the batch has it
                pass
            finally:
                with self._lock:
                    self._hand_over()

    def submit(self, item: T) -> R:
        mine: _Pending[T, R] = _Pending(item)
        with self._lock:
            self._queue.append(mine)
            lead = not self._busy
            self._busy = True
        if not lead:
            assert mine.event is not None
            mine.event.wait()  # woken either with a result or to lead the next batch
        if not mine.done:
            with self._lock:
                batch, self._queue = self._take()
            try:
                self._run(batch)
            finally:
                with self._lock:
                    self._hand_over()
        if mine.error is not None:
            raise mine.error
        assert mine.result is not None
        return mine.result

    def _run(self, batch: list[_Pending[T, R]]) -> None:
        try:
            self._commit(batch)
        except BaseException as exc:  # interrupted: every item without an outcome gets one
            for p in batch:
                if not p.done:
                    p.error = self._interrupted(exc)
            raise
        finally:
            for p in batch:  # nobody may wait forever, whatever was raised
                p.release()

    def _commit(self, batch: list[_Pending[T, R]]) -> None:
        """Give every item of ``batch`` a result or an error; only BaseException escapes."""
        self.batches += 1
        try:
            results = self._commit_batch([p.item for p in batch])
        except Exception as exc:  # noqa: BLE001 - classified below, handed to the callers
            if len(batch) == 1 or not self._retry_alone(exc):
                for p in batch:
                    p.error = exc
                return
            for n, p in enumerate(batch):
                self._commit([p])
                error = p.error
                if isinstance(error, Exception) and not self._retry_alone(error):
                    # The database itself is failing (lock, I/O, connection): the rest would
                    # fail the same way, each after its own wait.
                    for rest in batch[n + 1 :]:
                        rest.error = error
                    return
            return
        for p, r in zip(batch, results, strict=True):
            p.result = r
