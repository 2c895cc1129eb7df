"""Record signatures checked in worker processes while verify walks the chain.

    with SignaturePool(trust) as pool:
        pending = pool.submit(page)          # the page's signatures, checked elsewhere
        ...                                  # parse bodies, read content meanwhile
        verdicts = pending.result()          # one per row: audit.verify._verifier.signature_verdict

An Ed25519 check (~60 µs here) costs several times what everything else verify does with a
row, and the checks are independent of each other, unlike the links. Threads do not help:
``cryptography`` releases the GIL inside OpenSSL, but each check must take it back, and with
verify's own thread busy in Python they queue for it (measured: slower than one thread). So
each worker is a process: ``python -P .../audit/verify/_signature_worker.py``, a script that
imports ``cryptography`` only, started afresh (not forked: verify's reader thread may hold
locks; not ``multiprocessing``'s spawn, which re-imports the caller's main script). Each is
sent, for every row, only what the check needs (key id, signature, the signed message built
here by ``signed_message``; ``marshal`` over a pipe) and answers with the rows that did not
pass, which are judged here (``signature_verdict``). The rows are the walk's own, so a
signature is checked against the hash whose links verify checked. One thread per worker does
its pipe I/O, a request at a time.

Small logs are checked inline (:data:`POOL_FROM` events): starting processes (about 50 ms
of CPU each) costs more than it saves there.
"""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self

from audit.errors import DatabaseUnavailable
from audit.store.chain import EventRow
from audit.store.signing import DOMAIN, Trust, signed_message
from audit.verify._verdicts import Verdict, signature_verdict

SignatureResult = Verdict | bool | None
POOL_FROM = 4_000  # events: below this, signatures are checked in verify's own thread
_Item = tuple[str | None, str | None, bytes]  # key_id, signature, the signed message
# What a worker answers: the indexes in the chunk of the items that did not check out.
_Wire = list[int]
_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_signature_worker.py")


class _Worker:
    def __init__(self, trust: Trust) -> None:
        # By its path, with -P: this package's own file, and no folder of the caller's on
        # the module path (the worker imports cryptography only).
        self._proc = subprocess.Popen(
            [sys.executable, "-P", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-verify-pipe")
        self._io.submit(
            self._send,
            [(k.key_id, bytes.fromhex(k.public_key)) for k in trust.keys],
        )

    def _send(self, message: Any) -> None:
        assert self._proc.stdin is not None
        marshal.dump(message, self._proc.stdin)
        self._proc.stdin.flush()

    def _roundtrip(self, items: list[_Item]) -> _Wire:
        assert self._proc.stdout is not None
        try:
            self._send(items)
            answer: _Wire = marshal.load(self._proc.stdout)  # noqa: S302 - our own worker's pipe
        except (OSError, EOFError, ValueError):  # it died (killed, out of memory)
            raise DatabaseUnavailable(
                "a verify worker checking record signatures stopped "
                f"(exit status {self._proc.poll()})",
                hint="Check the machine's memory and processes, and run verify again.",
            ) from None
        return answer

    def submit(self, items: list[_Item]) -> Future[_Wire]:
        return self._io.submit(self._roundtrip, items)

    def close(self) -> None:
        self._io.shutdown(wait=True)
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _package_root() -> str:
    # This file is audit/verify/_signature_pool.py: the folder that holds ``audit`` is three up.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    existing = os.environ.get("PYTHONPATH")
    return root if not existing else os.pathsep.join((root, existing))


class Pending:
    """A page's signature checks under way."""

    def __init__(
        self,
        page: Sequence[EventRow],
        trust: Trust,
        chunks: list[tuple[int, Future[_Wire]]],
    ) -> None:
        self._page = page
        self._trust = trust
        self._chunks = chunks

    def result(self) -> list[SignatureResult]:
        """One verdict per row of the page, in its order. A row the worker could not check
        out is judged here, by the one rule (an unsigned row a log may hold, an unknown key,
        a bad signature)."""
        verdicts: list[SignatureResult] = [None] * len(self._page)
        for offset, future in self._chunks:
            for index in future.result():
                r = self._page[offset + index]
                verdicts[offset + index] = signature_verdict(
                    r.seq, r.key_id, r.signature, r.hash, self._trust
                )
        return verdicts


class SignaturePool:
    def __init__(self, trust: Trust, workers: int | None = None) -> None:
        self._trust = trust
        self._workers: list[_Worker] = []
        try:
            for _ in range(workers or cores()):
                self._workers.append(_Worker(trust))
        except BaseException:
            self.close()
            raise

    def submit(self, page: Sequence[EventRow]) -> Pending:
        step = max(1, -(-len(page) // len(self._workers)))
        chunks = []
        for worker, start in zip(self._workers, range(0, len(page), step), strict=False):
            items = _items(page[start : start + step])
            chunks.append((start, worker.submit(items)))
        return Pending(page, self._trust, chunks)

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
        self._workers = []

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _items(rows: Sequence[EventRow]) -> list[_Item]:
    """:func:`_item` of each row: in one pass while every hash is ASCII (always, but for a
    tampered column), else row by row."""
    try:
        return [(r.key_id, r.signature, DOMAIN + r.hash.encode("ascii")) for r in rows]
    except (ValueError, AttributeError):
        return [_item(r) for r in rows]


def _item(row: EventRow) -> tuple[str | None, str | None, bytes]:
    """What a worker checks for ``row``. A row whose hash cannot even be made into the signed
    message (a tampered column: text that is not ASCII) goes as one no worker accepts, so
    :meth:`Pending.result` judges it by the one rule and verify reports a defect, not a crash."""
    try:
        return row.key_id, row.signature, signed_message(row.hash)
    except ValueError:
        return None, None, b""


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on every platform
        return max(1, os.cpu_count() or 1)
