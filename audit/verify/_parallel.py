"""Verify's range-parallel walk: pages checked by one worker process per core, the chain
joined in seq order by the parent.

    jobs = walk_jobs(requested, census)         # 1: the one-process walk
    with RangeWalk(setup_of(verifier, url, page), jobs=jobs, upto=highest, page=page) as w:
        for result in w.pages():                # seq order
            absorb(verifier, result)            # then settle the page's lives as ever

Each worker (audit.verify._range) reads its own pages by seq range and makes the checks that
need no other row; the parent keeps what needs the rows before: the link and seq continuity
between pages, the Merkle tree and signature-column folds, the checkpoints, and each
request's life (:class:`audit.verify.lifecycle.Lifecycle`, fed the four body fields it reads). The
parent's own :class:`audit.verify._verifier.Verifier`
absorbs each page, so the report is the one the
one-process walk makes: its defects are put in the order that walk finds them (per row:
gap and link, hash, the relied-on checkpoint, signature and body, the checkpoint), and
capped and sorted per page the same way.

Pages are seq ranges of :data:`audit.verify._walk.PAGE` rows, which are the one-process
walk's pages exactly when the log holds every seq 1..highest and nothing else; so the range
walk is taken only then (:func:`walk_jobs`, from the census). A log with a gap is a damaged
log, and is walked by the one process. Page k goes to worker k mod n, :data:`AHEAD` pages queued per
worker, results read back in order: memory stays at a few pages whatever the log's size.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import subprocess
import sys
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

from audit.errors import DatabaseUnavailable
from audit.store.chain import Census
from audit.store.models import DefectKind
from audit.verify._range import EVERY, PageResult, Setup
from audit.verify._signature_pool import _package_root, cores
from audit.verify._verifier import CHECKPOINT_REWRITTEN, LINK_BROKEN, Verifier, gap_detail

JOBS_FROM = 50_000  # events: below this the one-process walk is faster than starting workers
AHEAD = 2  # pages queued per worker, so none waits while the parent joins the last one
# Defects a worker finds before a row's relied-on checkpoint check (the rest come after it).
_EARLY = frozenset({DefectKind.GAP, DefectKind.BROKEN_LINK, DefectKind.HASH_MISMATCH})


def walk_jobs(requested: int | None, census: Census) -> int:
    """How many workers walk the log: ``requested`` (None: one per core for a large log),
    or 1 (the one-process walk) for a log that is not exactly seq 1..highest."""
    # Rows at seq 1..highest, each seq once (the primary key): all of them iff as many.
    walked = census.rows - census.below_one_count
    whole = census.highest > 0 and walked == census.highest
    if not whole:
        return 1
    if requested is None:
        return cores() if census.highest >= JOBS_FROM else 1
    return requested


def _fold(upto: float) -> int:
    return EVERY if upto == float("inf") else int(upto)


def setup_of(verifier: Verifier, url: str, page: int) -> Setup:
    """What the workers need of this verify: the keys, the relied-on checkpoint, the folds."""
    trust, relied, cp = verifier.trust, verifier.relied, verifier.checkpoint
    marks = [s.seq for s in (cp, relied) if s is not None]
    return {
        "url": url,
        "keys": [k.public_key for k in trust.keys] if trust is not None else None,
        "allow_unsigned_before": trust.allow_unsigned_before if trust is not None else 1,
        "relied": (
            (relied.seq, relied.hash, sorted(relied.keys), relied.signatures_digest)
            if relied is not None
            else None
        ),
        "tree_upto": _fold(verifier.tree_upto) if verifier.tree is not None else 0,
        "sigs_upto": _fold(verifier.sigs_upto) if verifier.sigs is not None else 0,
        "tree_cut": cp.seq if cp is not None and cp.root is not None else 0,
        "sigs_cut": relied.seq if relied is not None else 0,
        "marks": marks,
        "page": page,
    }


def absorb(v: Verifier, result: PageResult) -> None:
    """Join a worker's page to the walk so far, as :meth:`Verifier.feed` of its rows would."""
    (count, size, first, first_prev, last, last_hash, found, lives, unsigned, marks,
     leaves, cut, sigs_before, sigs_after) = result  # fmt: skip
    v.count += count
    v.bytes += size
    v.unsigned_allowed += unsigned
    # (row seq, place in that row's checks, defect seq, kind, detail)
    items: list[tuple[int, int, int | None, DefectKind, str]] = []
    if first != v.expected:
        items.append((first, 0, v.expected, DefectKind.GAP, gap_detail(v.expected, first)))
    if first_prev != v.prev_hash:
        items.append((first, 0, first, DefectKind.BROKEN_LINK, LINK_BROKEN))
    for row, kind_value, seq, detail in found:
        kind = DefectKind(kind_value)
        items.append((row, 1 if kind in _EARLY else 3, seq, kind, detail))
    tree, sigs, cp, relied = v.tree, v.sigs, v.checkpoint, v.relied
    if tree is not None:
        for leaf in leaves[:cut]:
            tree.add_leaf(leaf)
    if cp is not None and cp.seq in marks:
        v.checkpoint_seen = True
        problem: str | None = CHECKPOINT_REWRITTEN
        if cp.hash is None or marks[cp.seq] == cp.hash:
            problem = v.root_problem(cp.seq, cp.root) if cp.root is not None else None
        if problem is not None:
            items.append((cp.seq, 4, cp.seq, DefectKind.CHECKPOINT, problem))
    if tree is not None:
        for leaf in leaves[cut:]:
            tree.add_leaf(leaf)
    if sigs is not None:
        sigs.add_lines(sigs_before)
        if relied is not None and relied.seq in marks:
            problem = v.relied_problem(marks[relied.seq])
            if problem is not None:
                items.append((relied.seq, 2, relied.seq, DefectKind.CHECKPOINT, problem))
        sigs.add_lines(sigs_after)
    items.sort(key=lambda item: (item[0], item[1]))  # stable: a row's own order is kept
    for _, _, seq, kind, detail in items:
        v._defect(seq, kind, detail)  # the Verifier's own cap, as its feed() applies it
    feed = v.life.feed_fields
    for life in lives:
        feed(*life)
    v.expected = last + 1
    v.prev_hash = last_hash


class _Process:
    """One worker process and its pipes."""

    def __init__(self, setup: Setup) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "audit.verify._range_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": _package_root()},
        )
        self.send(setup)

    def send(self, message: Any) -> None:
        assert self._proc.stdin is not None
        try:
            marshal.dump(message, self._proc.stdin)
            self._proc.stdin.flush()
        except OSError:  # a broken pipe: it died (killed, out of memory) before reading
            raise self._stopped(f"it stopped (exit status {self._proc.poll()})") from None

    def receive(self) -> PageResult | None:
        assert self._proc.stdout is not None
        try:
            tag, value = marshal.load(self._proc.stdout)  # noqa: S302 - our own worker's pipe
        except (EOFError, ValueError):
            tag, value = "error", f"it stopped (exit status {self._proc.poll()})"
        if tag == "error":
            raise self._stopped(value)
        result: PageResult | None = value
        return result

    @staticmethod
    def _stopped(reason: str) -> DatabaseUnavailable:
        return DatabaseUnavailable(
            f"a verify worker could not check its pages of the audit log: {reason}",
            hint="Check that the database is readable, or verify in one process (--jobs 1).",
        )

    def close(self, *, abort: bool) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):  # it already stopped
                self._proc.stdin.close()
        if abort:  # it may be blocked writing a page nobody will read
            self._proc.kill()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


class RangeWalk:
    def __init__(self, setup: Setup, *, jobs: int, upto: int, page: int) -> None:
        self._upto = upto
        self._page = page
        self._workers: list[_Process] = []
        try:
            for _ in range(jobs):
                self._workers.append(_Process(setup))
        except BaseException:
            self.close(abort=True)
            raise

    def pages(self) -> Iterator[PageResult]:
        """Every page's result, in seq order (an empty range, possible only if rows vanished
        during the walk, is skipped: the census accounts for them)."""
        starts = iter(range(1, self._upto + 1, self._page))
        workers = self._workers
        queued: list[_Process] = []  # in page order
        for _ in range(AHEAD):
            for worker in workers:
                if not self._ask(worker, starts):
                    break
                queued.append(worker)
        taken = 0
        while taken < len(queued):
            worker = queued[taken]
            taken += 1
            result = worker.receive()
            if self._ask(worker, starts):
                queued.append(worker)
            if taken > len(workers) * AHEAD:  # keep the list short
                del queued[:taken]
                taken = 0
            if result is not None:
                yield result

    def _ask(self, worker: _Process, starts: Iterator[int]) -> bool:
        lo = next(starts, None)
        if lo is None:
            return False
        worker.send((lo, min(lo + self._page - 1, self._upto)))
        return True

    def close(self, *, abort: bool = False) -> None:
        for worker in self._workers:
            worker.close(abort=abort)
        self._workers = []

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(abort=exc_type is not None)
