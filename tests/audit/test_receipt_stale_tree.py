"""A stored Merkle tree that covers more leaves than the log has events (nodes planted
ahead of their leaves, or left from a log that was truncated) is refused by `prove` and
`tree-head` on a format-1 log before anything is signed from it, on both backends."""

from __future__ import annotations

import pytest

from audit import AuditStore
from audit.proofs.merkle import node_hash
from audit.proofs.receipt_checks import check_receipt
from audit.proofs.receipts import ReceiptError, dumps, make_receipt, rebuild_tree, signed_head
from tests.audit.conftest import Raw, fill

KEY = bytes.fromhex("11" * 32)


def test_nodes_stored_ahead_of_the_log_are_refused_before_anything_is_signed(
    store: AuditStore, raw: Raw
) -> None:
    fill(store, requests=4)  # 8 events
    signed_head(store, KEY)  # the stored tree covers them
    fake = b"\x07" * 32
    for level, index, value in ((0, 8, fake), (0, 9, fake), (1, 4, node_hash(fake, fake))):
        raw.execute(
            "INSERT INTO merkle_nodes (level, node_index, hash) VALUES (?, ?, ?)",
            (level, index, value),
        )
    ahead = "covers 10 leaves but the log holds 8 events"
    with pytest.raises(ReceiptError, match=ahead) as refused:
        make_receipt(store, "req-1", KEY)
    assert "tree-head --rebuild" in (refused.value.hint or "")
    with pytest.raises(ReceiptError, match=ahead):
        signed_head(store, KEY)

    assert rebuild_tree(store) == 8  # as the owner: recomputed from the log
    receipt = make_receipt(store, "req-1", KEY)
    assert check_receipt(dumps(receipt), [receipt.checkpoint.public_key]).ok
