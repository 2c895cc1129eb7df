"""Verify a log: recompute every link, check each request's life and every record signature.

    report = verify_log(store, trust=trust)       # a VerifyReport: report.ok, report.defects
    check_checkpoint(store, checkpoint)           # CheckpointError unless it is this log's

The walk reads the store's tables itself, in pages (audit.verify._read); a large log is
walked by worker processes side by side (audit.verify._parallel) and its record signatures
checked by another pool (audit.verify._signature_pool). A format-2 log's events after the
format-1 walk are walked by audit.verify._sequenced.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable

from sqlalchemy import Connection, select

from audit.errors import CheckpointError
from audit.store import AuditStore
from audit.store.chain import MAX_DEFECTS, Census, EventRow
from audit.store.models import Checkpoint, Relied, VerifyReport
from audit.store.schema import EVENTS
from audit.store.signing import Trust, TrustedKeys
from audit.verify._erasures import with_erasures
from audit.verify._parallel import RangeWalk, absorb, setup_of, walk_jobs
from audit.verify._read import ChainReader
from audit.verify._sequenced import DEFAULT_STALLED_AFTER_S, format_1_census, verify_sequenced
from audit.verify._sequenced_checkpoints import split_checkpoint
from audit.verify._signature_pool import POOL_FROM, Pending, SignaturePool, SignatureResult
from audit.verify._verifier import Verifier
from audit.verify.body import newest_refs, parse_page, referenced
from audit.verify.eras import era_defects
from audit.verify.lifecycle import Target

# Rows a verify reads and checks at a time. Smaller is faster down to about 1,000: a page's
# rows, bodies and payloads stay in the CPU's cache while they are checked (2,000 against
# 5,000: 1.1-1.2x events/s, bench/results/verify.md run 4).
PAGE = 2000
LOOKUP_CHUNK = 1000  # seqs looked up in one query when a page's events name others


def verify_log(
    store: AuditStore,
    progress: Callable[[int, int], None] | None = None,
    checkpoint: Checkpoint | None = None,
    *,
    trust: Trust | None = None,
    relied: Relied | None = None,
    measure_head: bool = False,
    jobs: int | None = None,
    page_rows: int | None = None,
    stalled_after_s: float = DEFAULT_STALLED_AFTER_S,
) -> VerifyReport:
    """Recompute every link, check each request's life and, against ``trust``, every
    record signature; ``progress(events_done, events_total)`` after each page.

    Without ``trust`` a store with a signer trusts its own key only; a store without one
    checks no signatures, and the report says so (``signatures_checked`` is False). The
    gateway's facade always passes the keys it trusts (gateway.evidence).

    ``relied``: a verified checkpoint (checked by the caller: signer pinned, store, keys)
    whose verify checked the signatures of events 1..``relied.seq``; those are not checked
    again, everything else is (audit.verify._walk_digests). ``measure_head``: the report carries
    the head's Merkle root and signature-column digest, for a verified checkpoint.

    ``jobs``: worker processes that check pages of the log side by side
    (audit.verify._parallel); 1 walks in this process; None, one per core on a large log.
    The report is the same either way. ``page_rows``: rows read and checked at a time.
    ``stalled_after_s``: format 2, how old the oldest event pending integration may be
    before it is a STALLED defect (the integrator is stopped or blocked).
    """
    if trust is None and store.signer is not None:
        trust = Trust(TrustedKeys.of([store.signer.public_key]))
    if checkpoint is not None:
        check_checkpoint(store, checkpoint)
    # A checkpoint of a format-2 seq names a link, which only the format-2 walk computes.
    checkpoint, linked_checkpoint = split_checkpoint(checkpoint, store.sequenced_from)
    # Counted first, and the walk stops at the highest seq counted, so appends made while
    # verify runs are neither walked nor miscounted.
    census = _census(store)
    era = store.sequenced_from
    if era is not None:  # the format-1 walk ends where format 2 begins
        census = format_1_census(store.backend, census, era)
    total = census.highest
    page_rows = page_rows or PAGE
    # Links only (no signature checked, none folded) reads no signature column.
    signatures = trust is not None or relied is not None or measure_head
    reader = ChainReader(store.backend, upto=census.highest, page=page_rows, signatures=signatures)
    verifier = Verifier(
        checkpoint,
        trust,
        same_time=reader.same_time,
        relied=relied,
        measure_head=measure_head,
    )
    workers = walk_jobs(jobs, census)
    if workers > 1:
        _verify_ranges(store, verifier, census, workers, page_rows, progress)
        verifier.account(census)
        report = _with_sequenced(store, verifier, trust, stalled_after_s, linked_checkpoint)
        return with_erasures(store, _with_eras(store, report, trust))
    after = relied.seq if relied is not None else 0
    # Signatures are checked by worker processes a page ahead of the walk (a large log);
    # those a verified checkpoint stands for are not sent.
    big = total - after >= POOL_FROM
    pool = SignaturePool(trust) if trust is not None and big else None
    # The walk allocates a page of rows and parsed bodies at a time, which sets off the
    # cyclic collector's full passes over the whole heap (a quarter of verify's CPU,
    # measured): the objects that exist before the walk are set aside for its duration, and
    # the collector is off (the walk makes no cycles; the command runs with it off, and the
    # range walk's workers too).
    frozen = gc.isenabled()
    if frozen:
        gc.freeze()
        gc.disable()
    try:
        ahead: tuple[list[EventRow], Pending | None] | None = None
        for page in reader.pages():
            pending = None
            if pool is not None and page[-1].seq > after:
                # Only rows after the relied-on seq: a partial page is padded on use.
                pending = pool.submit(
                    page if page[0].seq > after else [r for r in page if r.seq > after]
                )
            if ahead is not None:
                _verify_page(store, verifier, reader, *ahead, progress, total)
            ahead = (page, pending)
        if ahead is not None:
            _verify_page(store, verifier, reader, *ahead, progress, total)
    finally:
        if frozen:
            gc.enable()
            gc.unfreeze()
        if pool is not None:
            pool.close()
    verifier.account(census)
    report = _with_sequenced(store, verifier, trust, stalled_after_s, linked_checkpoint)
    return with_erasures(store, _with_eras(store, report, trust))


def _with_eras(store: AuditStore, report: VerifyReport, trust: Trust | None) -> VerifyReport:
    """The report with the key eras' defects added (audit.verify.eras): a trusted key's
    signature counts only within its era."""
    if trust is None:
        return report
    found = era_defects(store, trust)
    if not found:
        return report
    defects = sorted([*report.defects, *found], key=lambda d: d.seq or 0)[:MAX_DEFECTS]
    return report.model_copy(update={"ok": False, "defects": tuple(defects)})


def check_checkpoint(store: AuditStore, checkpoint: Checkpoint) -> None:
    """:class:`CheckpointError` unless the checkpoint is of this database."""
    if checkpoint.store_id != store.store_id:
        raise CheckpointError(
            f"the checkpoint is for audit database {checkpoint.store_id}, "
            f"not this one ({store.store_id}).",
            hint="Verify against the database the checkpoint was taken from.",
        )


# What a verify counts before it walks (SQL both dialects read alike, run as it stands: no
# compile). Each count is one the database answers without reading a row: the table's own
# count, the highest key and the keys below the chain. The one statement before, a CASE over
# every row, read the whole table (4-5 ms on a log of 30,000 events here, growing with it).
_CENSUS_SQL = (
    "SELECT (SELECT count(*) FROM events), (SELECT max(seq) FROM events WHERE seq >= 1), "
    "(SELECT count(*) FROM events WHERE seq < 1)"
)
_BELOW_SQL = f"SELECT seq FROM events WHERE seq < 1 ORDER BY seq LIMIT {MAX_DEFECTS}"


def _census(store: AuditStore) -> Census:
    with store.backend.reader.connect() as conn:
        rows, highest, below_count = conn.exec_driver_sql(_CENSUS_SQL).one()
        seqs = conn.exec_driver_sql(_BELOW_SQL).scalars()
        return Census(rows, highest or 0, tuple(seqs), below_count)


def _with_sequenced(
    store: AuditStore,
    verifier: Verifier,
    trust: Trust | None,
    stalled_after_s: float,
    checkpoint: Checkpoint | None = None,
) -> VerifyReport:
    """A format-2 log: the format-1 walk's report with the format-2 walk's added (which
    carries on the format-1 walk's lifecycle state: its open intents)."""
    report = verifier.report()
    era = store.sequenced_from
    if era is None:
        return report
    return verify_sequenced(
        store.backend,
        era,
        trust,
        report,
        store_id=store.store_id,
        life=verifier.life,
        stalled_after_s=stalled_after_s,
        checkpoint=checkpoint,
    )


def _verify_ranges(
    store: AuditStore,
    verifier: Verifier,
    census: Census,
    workers: int,
    page_rows: int,
    progress: Callable[[int, int], None] | None,
) -> None:
    """The walk in ``workers`` processes (audit.verify._parallel), joined here."""
    # The workers open the database themselves: the URL with its password, sent over
    # their pipes only.
    url = store.backend.reader.url.render_as_string(hide_password=False)
    setup = setup_of(verifier, url, page_rows)
    frozen = gc.isenabled()
    if frozen:
        gc.freeze()
    try:
        with RangeWalk(setup, jobs=workers, upto=census.highest, page=page_rows) as walk:
            for result in walk.pages():
                absorb(verifier, result)
                _settle_page(store, verifier, result[4], progress, census.highest)
    finally:
        if frozen:
            gc.unfreeze()


def _verify_page(
    store: AuditStore,
    verifier: Verifier,
    reader: ChainReader,
    page: list[EventRow],
    pending: Pending | None,
    progress: Callable[[int, int], None] | None,
    total: int,
) -> None:
    parsed = parse_page([row.body for row in page])  # once per event: the hot loop
    contents = reader.content_digests(referenced(parsed), newest_refs(parsed))
    verdicts: list[SignatureResult] | None = None
    if pending is not None:
        verdicts = pending.result()
        if len(verdicts) < len(page):  # the relied-on rows: Verifier checks those itself
            padding: list[SignatureResult] = [False] * (len(page) - len(verdicts))
            verdicts = padding + verdicts
    verifier.feed_page(page, parsed, contents, verdicts)
    if page:
        _settle_page(store, verifier, page[-1].seq, progress, total)


def _settle_page(
    store: AuditStore,
    verifier: Verifier,
    last_seq: int,
    progress: Callable[[int, int], None] | None,
    total: int,
) -> None:
    """After a page's rows: look up what its events name, settle their lives."""
    targets, request_ids = verifier.wanted()
    found: dict[int, Target] = {}
    lives: list[Target] = []
    if targets or request_ids:
        with store.backend.reader.connect() as conn:
            found = _targets(conn, targets)
            lives = _lives(conn, request_ids, last_seq, verifier.wanted_kinds)
    verifier.settle(found, lives)
    if progress is not None:
        progress(verifier.count, max(total, verifier.count))


_TARGET_COLUMNS = (
    EVENTS.c.seq,
    EVENTS.c.kind,
    EVENTS.c.request_id,
    EVENTS.c.request_hash,
    EVENTS.c.hash,
)


def _targets(conn: Connection, seqs: set[int]) -> dict[int, Target]:
    """The rows at the seqs a page's events name (CACHE_HIT, REPLAY, INTEGRITY_ALERT)."""
    found: dict[int, Target] = {}
    wanted = sorted(seqs)
    for start in range(0, len(wanted), LOOKUP_CHUNK):
        chunk = wanted[start : start + LOOKUP_CHUNK]
        for row in conn.execute(select(*_TARGET_COLUMNS).where(EVENTS.c.seq.in_(chunk))):
            found[row.seq] = Target(*row)
    return found


def _lives(
    conn: Connection, request_ids: set[str], upto: int, kinds: Iterable[str]
) -> list[Target]:
    """The REQUEST and terminal events of requests with an unmatched outcome, up to ``upto``."""
    if not request_ids:
        return []
    query = (
        select(*_TARGET_COLUMNS)
        .where(
            EVENTS.c.request_id.in_(sorted(request_ids)),
            EVENTS.c.kind.in_(list(kinds)),
            EVENTS.c.seq >= 1,
            EVENTS.c.seq <= upto,
        )
        .order_by(EVENTS.c.seq)
    )
    return [Target(*row) for row in conn.execute(query)]
