"""Scenario 3: long mixed sequences of upstream faults.

Guarantee: every failed attempt is recorded exactly once (ATTEMPT_FAILED events == failures
the fake served), ``retry-after`` is honoured up to its cap, the final error is typed, and
no request gets more than one RESPONSE.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from audit import AuditStore, EventKind
from audit.verify import verify_log
from gateway import Gateway, Settings, UpstreamError, UpstreamRejected, UpstreamUnavailable
from tests.fakes.messages_api import FakeMessagesAPI, Reply

REQUESTS = 60
MAX_ATTEMPTS = 4
CAP_S = 0.2
TIMEOUT_S = 0.3


def _retryable(rng: random.Random) -> tuple[Reply, float | None]:
    """One retryable fault and the wait it asks for (None: the backoff decides)."""
    pick = rng.randrange(7)
    if pick == 0:
        wait = rng.choice([0.05, 0.1, 5.0])  # 5 s must be cut to the cap
        return Reply.error(429, retry_after=wait), wait
    if pick == 1:
        return Reply.error(500), None
    if pick == 2:
        return Reply.error(529), None
    if pick == 3:
        return Reply.drop(), None
    if pick == 4:
        return Reply.stream_error(), None  # non-streaming request: the API answers 529
    if pick == 5 and rng.random() < 0.3:  # time-outs cost TIMEOUT_S each: keep them rare
        return Reply.slow(TIMEOUT_S + 0.5), None
    return Reply.error(503, retry_after_ms=40), 0.04


@pytest.mark.slow  # waits out upstream time-outs
def test_mixed_fault_sequences_record_every_attempt_once(
    fake_api: FakeMessagesAPI, policy_dir: Path, tmp_path: Path
) -> None:
    """60 requests, each a random run of faults ending in success, a final error or give-up."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    rng = random.Random(3)
    settings = Settings(
        policy_dir=policy_dir,
        database_url=url,
        anthropic_api_key="sk-ant-upstream-faults",
        default_caller="tests",
        anthropic_base_url=fake_api.base_url,
        durability="os",
        max_attempts=MAX_ATTEMPTS,
        retry_backoff_base_s=0.01,
        retry_after_cap_s=CAP_S,
        request_timeout_s=TIMEOUT_S,
    )
    expected: dict[str, tuple[int, str, list[float | None]]] = {}
    outcomes: Counter[str] = Counter()
    with Gateway(settings) as gw:
        for n in range(REQUESTS):
            faults = [_retryable(rng) for _ in range(rng.randrange(MAX_ATTEMPTS + 1))]
            replies = [f for f, _ in faults]
            ending = rng.choice(["ok", "ok", "malformed", "400"])
            if len(faults) < MAX_ATTEMPTS:
                replies.append(
                    {"ok": Reply.ok(), "malformed": Reply.malformed(), "400": Reply.error(400)}[
                        ending
                    ]
                )
            else:
                ending = "gave_up"
            fake_api.script(*replies)
            try:
                result = gw.complete("quant_strategy", f"faults {n}")
            except UpstreamError as exc:
                rid = exc.request_id
                kind = type(exc).__name__
                if ending == "gave_up":
                    assert isinstance(exc, UpstreamUnavailable)
                else:
                    assert isinstance(exc, UpstreamRejected) and ending != "ok"
            else:
                rid, kind = result.request_id, "ok"
                assert ending == "ok"
            assert rid is not None and fake_api.pending == 0
            failures = len(faults) + (1 if ending in ("malformed", "400") else 0)
            expected[rid] = (failures, kind, [w for _, w in faults])
            outcomes[kind] += 1

    with AuditStore.open(url, durability="os") as store:
        assert verify_log(store).ok
        attempts_checked = waits_checked = 0
        for rid, (failures, kind, waits) in expected.items():
            events = store.events_for_request(rid)
            got = Counter(e.kind for e in events)
            assert got[EventKind.ATTEMPT_FAILED] == failures, rid
            assert got[EventKind.REQUEST] == 1
            assert got[EventKind.RESPONSE] == (1 if kind == "ok" else 0)
            assert got[EventKind.FAILED] == (0 if kind == "ok" else 1)
            attempts_checked += failures
            # A wait the server asked for separates a failed attempt from the next event.
            for i, wait in enumerate(waits):
                if wait is None or i + 2 >= len(events):
                    continue
                failed, following = events[i + 1], events[i + 2]
                gap = (following.recorded_at - failed.recorded_at).total_seconds()
                assert failed.data["retry_after_s"] == wait
                if not failed.data["will_retry"]:  # the last attempt: no wait, FAILED follows
                    continue
                assert gap >= min(wait, CAP_S) - 0.005, (rid, wait, gap)
                assert gap < min(wait, CAP_S) + TIMEOUT_S + 0.5, (rid, wait, gap)
                waits_checked += 1
    assert outcomes["ok"] and outcomes["UpstreamRejected"] and outcomes["UpstreamUnavailable"]
    print(
        f"upstream: requests={REQUESTS} failed_attempts={attempts_checked} "
        f"waits_checked={waits_checked} outcomes={dict(outcomes)}"
    )
