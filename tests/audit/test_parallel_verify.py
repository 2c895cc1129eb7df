"""The range-parallel walk (audit.verify._parallel) reports exactly what the one-process walk
reports: every case of the tamper matrix, the verified-checkpoint attacks, signatures,
checkpoints with a tree root, and lifecycle defects, each verified with jobs=1 and jobs=2 in
pages of two rows (so that defects fall on page boundaries and inside pages)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from audit import AuditStore, Checkpoint, DefectKind, EventDraft, EventKind, VerifyReport
from audit.proofs import checkpoint as checkpoints
from audit.proofs import take_checkpoint, verified_checkpoint
from audit.store.chain import link_hash
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify import verify_log
from tests.audit.conftest import Raw, fill
from tests.audit.test_tamper import MATRIX

pytestmark = pytest.mark.slow  # verify's worker processes (jobs=2)

RECORD = Signer.from_text("42" * 32)
KEY = bytes(range(32))
TRUST = Trust(TrustedKeys.of([RECORD.public_key]))
PAGE = 2


def _both(store: AuditStore, **kwargs: Any) -> VerifyReport:
    """The report of each walk; they must be equal (defects, order, folds, counts)."""
    one = verify_log(store, jobs=1, page_rows=PAGE, **kwargs)
    two = verify_log(store, jobs=2, page_rows=PAGE, **kwargs)
    assert two == one
    return one


@pytest.mark.parametrize("tamper", [m[0] for m in MATRIX], ids=[m[0].__name__ for m in MATRIX])
def test_each_tamper_case_is_reported_alike_by_both_walks(
    store: AuditStore, raw: Raw, tamper: Callable[[Raw], None]
) -> None:
    fill(store)
    assert _both(store, measure_head=True).ok
    raw.unguard()
    tamper(raw)
    # A log with a gap (delete_middle) is walked by one process either way: page ranges
    # would no longer be the one-process walk's pages (audit.verify._parallel.walk_jobs).
    assert not _both(store).ok
    _both(store, measure_head=True)


@pytest.fixture
def signed(any_url: str) -> Iterator[AuditStore]:
    with AuditStore.open(any_url, signer=RECORD) as store:
        fill(store, requests=4)
        yield store


def _verified(store: AuditStore) -> Checkpoint:
    report = _both(store, trust=TRUST, measure_head=True)
    assert report.ok, report.defects
    return verified_checkpoint(store, report, KEY)


def _relied(cp: Checkpoint) -> Any:
    return checkpoints.relied_on(cp, TRUST.keys, {checkpoints.public_key(KEY)})


def _append_more(store: AuditStore, n: int = 3) -> None:
    for i in range(n):
        store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"later-{i}", task="t"))


def test_since_verified_attacks_are_reported_alike(signed: AuditStore, raw: Raw) -> None:
    cp = _verified(signed)
    _append_more(signed)
    assert _both(signed, trust=TRUST, relied=_relied(cp)).ok
    raw.unguard()
    # A signature column edited before the checkpoint (only its digest can show it), a body
    # edited before it, a forged signature after it.
    raw.execute(
        "UPDATE events SET signature = ? WHERE seq = 2", (base64.b64encode(b"\1" * 64).decode(),)
    )
    body = raw.body(3).replace(b'"task":"compliance_review"', b'"task":"compliance_revie_"')
    raw.execute("UPDATE events SET body = ? WHERE seq = 3", (body,))
    raw.execute(
        "UPDATE events SET signature = ? WHERE seq = ?",
        (base64.b64encode(b"\2" * 64).decode(), cp.seq + 2),
    )
    since = _both(signed, trust=TRUST, relied=_relied(cp))
    assert {DefectKind.CHECKPOINT, DefectKind.HASH_MISMATCH, DefectKind.BAD_SIGNATURE} <= {
        d.kind for d in since.defects
    }
    full = _both(signed, trust=TRUST, measure_head=True)
    assert (2, DefectKind.BAD_SIGNATURE) in {(d.seq, d.kind) for d in full.defects}


def test_a_rewritten_history_under_a_checkpoint_with_a_root_is_reported_alike(
    signed: AuditStore, raw: Raw
) -> None:
    cp = _verified(signed)
    head = take_checkpoint(signed, KEY)  # a signed head with its Merkle root
    _append_more(signed)
    assert _both(signed, trust=TRUST, checkpoint=head, relied=_relied(cp)).ok
    raw.unguard()
    rows = raw.execute("SELECT seq, body, prev_hash FROM events ORDER BY seq")
    prev = str(rows[1][2])
    for seq, body, _ in rows[1:]:  # re-linked from seq 2 on: a self-consistent chain
        new = link_hash(prev, bytes(body))
        raw.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, new, seq))
        prev = new
    raw.execute("UPDATE events SET hash = ? WHERE seq = 2", ("sha256:" + "0" * 63 + "1",))
    report = _both(signed, trust=TRUST, checkpoint=head, relied=_relied(cp))
    assert DefectKind.CHECKPOINT in {d.kind for d in report.defects}
    _both(signed, trust=TRUST, checkpoint=head, measure_head=True)


def test_unsigned_and_untrusted_events_are_reported_alike(
    any_url: str, signed: AuditStore, raw: Raw
) -> None:
    with AuditStore.open(any_url, signer=Signer.from_text("43" * 32)) as other:
        other.append(EventDraft(kind=EventKind.EXPORT, request_id="forged"))
    raw.unguard()
    raw.execute("UPDATE events SET signature = NULL, key_id = NULL WHERE seq IN (1, 5)")
    report = _both(signed, trust=Trust(TRUST.keys, allow_unsigned_before=3))
    assert report.unsigned_allowed == 1
    head, _ = signed.head()
    assert {(5, DefectKind.UNSIGNED), (head, DefectKind.UNTRUSTED_SIGNER)} <= {
        (d.seq, d.kind) for d in report.defects
    }


def test_lifecycle_defects_are_reported_alike(store: AuditStore) -> None:
    fill(store)
    store.append(EventDraft(kind=EventKind.RESPONSE, request_id="nobody", request_hash=None))
    store.append(EventDraft(kind=EventKind.RESPONSE, request_id="req-1",
                            request_hash=f"sha256:{1:064x}"))  # fmt: skip
    store.append(EventDraft(kind=EventKind.CACHE_HIT, request_id="hit", data={"served_seq": 1}))
    report = _both(store)
    assert {DefectKind.ORPHAN_OUTCOME, DefectKind.DUPLICATE_OUTCOME, DefectKind.BAD_REFERENCE} <= {
        d.kind for d in report.defects
    }


def test_more_defects_than_the_cap_are_capped_alike(store: AuditStore, raw: Raw) -> None:
    """Past MAX_DEFECTS the first ones found are kept: the same ones in either walk."""
    for first in range(0, 1100, 100):
        store.append_many(
            [
                EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}")
                for n in range(first, first + 100)
            ]
        )
    raw.unguard()
    raw.execute("UPDATE events SET caller = 'x'")
    report = verify_log(store, jobs=1, page_rows=300)
    assert report == verify_log(store, jobs=2, page_rows=300)
    assert len(report.defects) == 1000


def test_defects_of_one_row_keep_the_order_the_one_process_walk_finds_them(
    signed: AuditStore, raw: Raw
) -> None:
    """At the verified checkpoint's seq, a stored hash edited: the hash mismatch (a worker's)
    comes before the checkpoint's own defect (the parent's), as in the one-process walk."""
    cp = _verified(signed)
    _append_more(signed)
    raw.unguard()
    raw.execute("UPDATE events SET hash = ? WHERE seq = ?", ("sha256:" + "f" * 64, cp.seq))
    report = _both(signed, trust=TRUST, relied=_relied(cp))
    at_seq = [d.kind for d in report.defects if d.seq == cp.seq]
    assert at_seq == [DefectKind.HASH_MISMATCH, DefectKind.CHECKPOINT]


def test_a_gap_hidden_by_a_row_below_seq_one_is_walked_alike(store: AuditStore, raw: Raw) -> None:
    """As many rows as the highest seq, one of them at seq 0 and one seq missing: not a
    whole log, so both walks are the one-process walk (audit.verify._parallel.walk_jobs)."""
    if raw.dialect != "sqlite":
        pytest.skip("PostgreSQL's CHECK constraint refuses a row below seq 1, from any role")
    fill(store)
    raw.unguard()
    row = raw.execute("SELECT seq, event_id, request_id, kind, recorded_at, body, prev_hash, hash "
                      "FROM events WHERE seq = 1")[0]  # fmt: skip
    raw.execute(
        "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, body, prev_hash, "
        "hash) VALUES (0, 'z', ?, ?, ?, ?, ?, ?)",
        row[2:],
    )
    raw.execute("DELETE FROM events WHERE seq = 4")
    report = _both(store)
    assert {DefectKind.OUTSIDE_CHAIN, DefectKind.GAP} <= {d.kind for d in report.defects}
