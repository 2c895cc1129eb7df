"""Verify's signature pool on a row whose hash column was tampered into text that is not ASCII:
the row is reported (the one rule judges it), verify does not crash on it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from audit.store.chain import EventRow
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify._signature_pool import SignaturePool

pytestmark = pytest.mark.slow  # a worker process


def _row(seq: int, hash_: str, signer: Signer) -> EventRow:
    signature = signer.sign("ab" * 32)
    return EventRow(
        seq, f"e{seq}", f"r{seq}", "request", datetime.now(UTC), None, None, None, None,
        b"{}", "00" * 32, hash_, signature, signer.key_id,
    )  # fmt: skip


def test_a_hash_that_is_not_ascii_is_a_verdict_not_a_crash() -> None:
    signer = Signer.from_text("11" * 32)
    trust = Trust(TrustedKeys.of([signer.public_key]))
    rows = [_row(1, "ab" * 32, signer), _row(2, "ab" * 31 + "é", signer)]
    with SignaturePool(trust, workers=1) as pool:
        verdicts = pool.submit(rows).result()
    assert verdicts[0] is None  # the genuine row checks out
    assert verdicts[1] is not None  # the tampered one is a defect, named
