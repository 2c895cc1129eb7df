"""What an export of a format-2 log (audit.store.sequenced) carries so it verifies offline.

    era = store.sequenced_from                         # None: format 1, nothing to add
    upto, linked = settled_head(reader, era)           # the head a format-2 export covers
    for event, extra in with_links(reader, era, events):
        record = {**event.export_row(signed=True), **extra}

A format-2 event stands alone (``prev_hash`` empty, ``hash = sha256(body)``, a signature
that names the log's store id); its place in the chain is its row in ``chain``, made by the
integrator. So each exported format-2 record carries its link (``link_prev``, ``link``;
both None while it is pending integration), and the record at an integrator checkpoint's
size carries that signed checkpoint (``integrator_checkpoint``): the offline verify
(gateway.evidence) checks each link, and each checkpoint's link, root and signer.

The head a format-2 export covers is its *settled* head, the last seq before the first one
with no row: a seq above it may still be committed by a writer in flight or voided by the
integrator, so an export up to the highest seq could count a slice that its second read
(audit.reports.export reads twice) no longer matches. At or below it nothing can be added.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from sqlalchemy import Connection, Engine, text

from audit.store.models import StoredEvent

LINK_KEYS = ("link_prev", "link")  # an exported format-2 record's link (None: pending)
CHECKPOINT_KEY = "integrator_checkpoint"  # on the record at the checkpoint's size
BATCH = 1000  # records whose links and checkpoints are read in one query each


def settled_head(reader: Engine, era: int) -> tuple[int, int]:
    """(settled head, linked head) of a format-2 log: every seq up to the settled head has
    its row (event or void) for good; the linked head is where the integrator's contiguous
    links end."""
    with reader.connect() as conn:
        linked = _linked_head(conn, era)
        start = max(linked, era - 1)
        if start == 0 and not _has(conn, 1):
            return 0, linked
        # The last seq at or above ``start`` whose next seq has no row: the pending tail
        # is short (the integrator keeps up), so this reads little.
        found = conn.execute(
            text(
                "SELECT min(e.seq) FROM events e WHERE e.seq >= :s AND NOT EXISTS "
                "(SELECT 1 FROM events n WHERE n.seq = e.seq + 1)"
            ),
            {"s": max(start, 1)},
        ).scalar_one()
    return (int(found) if found is not None else start), linked


def _linked_head(conn: Connection, era: int) -> int:
    """The end of the run of links from the integrator's latest checkpoint on (a few
    seconds' worth), not the highest ``chain`` row: a row planted far above the prefix
    (verify's ``outside_chain``) would make an export claim links it cannot carry."""
    base = conn.execute(text("SELECT coalesce(max(size), 0) FROM chain_checkpoints")).scalar_one()
    base = max(int(base), era - 1)
    if not _has(conn, base + 1, linked=True):
        return base
    end = conn.execute(
        text(
            "SELECT min(c.seq) FROM chain c WHERE c.seq > :b AND NOT EXISTS "
            "(SELECT 1 FROM chain n WHERE n.seq = c.seq + 1)"
        ),
        {"b": base},
    ).scalar_one()
    return int(end)


def _has(conn: Connection, seq: int, *, linked: bool = False) -> bool:
    """Whether seq has an event (``linked``: a link)."""
    query = (
        "SELECT 1 FROM chain WHERE seq = :s" if linked else "SELECT 1 FROM events WHERE seq = :s"
    )
    return conn.execute(text(query), {"s": seq}).first() is not None


def with_links(
    reader: Engine, era: int, events: Iterable[StoredEvent]
) -> Iterator[tuple[StoredEvent, dict[str, Any]]]:
    """Each event with what its record adds: its link and, at a checkpoint's size, the
    integrator's signed checkpoint (format-2 seqs only). Read a batch at a time, so memory
    stays flat however long the export."""
    it = iter(events)
    while batch := list(islice(it, BATCH)):
        seqs = [e.seq for e in batch if e.seq >= era]
        links, checkpoints = _chain_of(reader, seqs) if seqs else ({}, {})
        for event in batch:
            if event.seq < era:
                yield event, {}
                continue
            prev, link = links.get(event.seq, (None, None))
            extra: dict[str, Any] = {"link_prev": prev, "link": link}
            if event.seq in checkpoints:
                extra[CHECKPOINT_KEY] = checkpoints[event.seq]
            yield event, extra


def _chain_of(reader: Engine, seqs: list[int]) -> tuple[dict[int, tuple[str, str]], dict[int, Any]]:
    with reader.connect() as conn:
        links = {
            int(r.seq): (str(r.prev_hash), str(r.hash))
            for r in conn.execute(
                text("SELECT seq, prev_hash, hash FROM chain WHERE seq = ANY(:s)"), {"s": seqs}
            )
        }
        checkpoints: dict[int, Any] = {}
        for r in conn.execute(
            text("SELECT size, checkpoint FROM chain_checkpoints WHERE size = ANY(:s)"),
            {"s": seqs},
        ):
            try:
                checkpoints[int(r.size)] = json.loads(str(r.checkpoint))
            except ValueError:
                # Carried as stored: the offline verify names what is wrong with it.
                checkpoints[int(r.size)] = str(r.checkpoint)
    return links, checkpoints
