"""The in-process memo of recorded answers is bounded and least-recently-used."""

from __future__ import annotations

from gateway.request import Served, ServedMemo


def _served(seq: int, size: int = 10) -> Served:
    return Served(
        seq=seq, request_id=f"r{seq}", hash=f"h{seq}", stop_reason=None, response={}, size=size
    )


def test_the_least_recently_used_entry_is_dropped_first() -> None:
    memo = ServedMemo(capacity=2)
    memo.put("a", _served(1))
    memo.put("b", _served(2))
    assert memo.get("a") is not None  # "a" is now the most recently used
    memo.put("c", _served(3))
    assert memo.get("b") is None
    assert [memo.get(k).seq for k in ("a", "c")] == [1, 3]  # type: ignore[union-attr]


def test_the_memo_is_bounded_in_bytes_of_recorded_answers() -> None:
    memo = ServedMemo(capacity=100, max_bytes=1000)
    memo.put("a", _served(1, size=600))
    memo.put("b", _served(2, size=600))  # together over the budget: "a" goes
    assert memo.get("a") is None and memo.get("b") is not None
    memo.put("huge", _served(3, size=5000))  # never fits: not kept, nothing else evicted
    assert memo.get("huge") is None and memo.get("b") is not None
