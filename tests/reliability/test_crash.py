"""Scenario 1: a gateway process killed with SIGKILL at random points of its requests.

Guarantee (reference/audit.md 4 and 5): after ``kill -9`` mid-request every acknowledged
answer is recorded with its outcome, no upstream call happened without a committed intent,
verify passes, and the interrupted requests show as ``incomplete``.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from audit.canonical import digest
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.reliability.helpers import ForkServer, log_state, run_cli, settings_for

KILLS = 50
THREADS = 2  # two threads share one Gateway, so some kills land inside a group commit


@pytest.mark.slow
def test_sigkill_at_random_points_loses_no_acknowledged_record(
    fork_server: ForkServer, fake_api: FakeMessagesAPI, policy_dir: Path, tmp_path: Path
) -> None:
    """50 SIGKILLs at random delays; every acked answer survives; interrupted = incomplete."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    rng = random.Random(7)

    def sometimes_slow(_request: RecordedRequest) -> Reply:
        # About half the answers take 50-400 ms, so many kills land during the upstream call.
        return (
            Reply.slow(rng.uniform(0.05, 0.4), then=Reply.ok())
            if rng.random() < 0.5
            else Reply.ok()
        )

    fake_api.set_default(sometimes_slow)
    settings = settings_for(url, fake_api.base_url, policy_dir)
    acks: list[dict[str, object]] = []
    exits: list[dict[str, object]] = []
    for i in range(KILLS):
        # Short delays hit start-up and the first intent commit; long ones hit steady state.
        delay = rng.uniform(0.0, 0.35) if i % 2 else rng.uniform(0.35, 1.2)
        records = fork_server.run(
            {
                "name": f"kill{i}",
                "settings": settings,
                "task": "quant_strategy",  # record mode: every request goes upstream
                "prompts": [f"idea {i}-{j}" for j in range(500)],
                "threads": THREADS,
                "kill_after": delay,
            }
        )
        assert not [r for r in records if r["event"] in ("crash", "error")], records
        acks += [r for r in records if r["event"] == "ack"]
        exits += [r for r in records if r["event"] == "exit"]

    assert len(exits) == KILLS and all(e["killed"] for e in exits), "a child ended on its own"
    state = log_state(url)
    assert state.verified, state.defects

    # Every acknowledged answer is there, as a RESPONSE at the seq the caller was given.
    for ack in acks:
        rid, seq = str(ack["request_id"]), int(str(ack["seq"]))
        assert state.statuses[rid] == "completed"
        at = state.seqs[rid].index(seq)
        assert state.kinds[rid][at] == "response"

    # No upstream call without a committed intent: each body the fake received is the
    # request_body payload of some REQUEST event.
    # A child killed while writing its request leaves a truncated body at the fake; the real
    # API would refuse it, so only complete requests count as upstream calls.
    complete = [r for r in fake_api.requests if len(r.body) == int(r.headers["content-length"])]
    received = {digest(r.body) for r in complete if r.json is not None}
    assert received <= state.intent_bodies

    # Interrupted requests show as incomplete; nothing else is left half-done.
    counts = Counter(state.statuses.values())
    assert set(counts) <= {"completed", "incomplete"}, counts
    # A kill between the outcome commit and the caller's return leaves an answer recorded
    # that nobody saw: allowed (at most one per thread per kill), the reverse is not.
    unseen = counts["completed"] - len(acks)
    assert 0 <= unseen <= KILLS * THREADS
    assert 0 < counts["incomplete"] <= KILLS * THREADS, (counts, len(fake_api.requests))
    for rid, status in state.statuses.items():
        if status == "incomplete":
            assert state.kinds[rid] == ("request",)

    # The auditor's view through the real CLI agrees.
    env = {"GATEWAY_DATABASE_URL": url}
    code, out, err = run_cli(["audit", "verify"], env)
    assert code == 0, err
    code, out, err = run_cli(["audit", "list", "--limit", "0", "--format", "jsonl"], env)
    assert code == 0, err
    listed = Counter(json.loads(line)["status"] for line in out.splitlines())
    assert listed == counts
    print(
        f"crash: kills={KILLS} acked={len(acks)} upstream_calls={len(fake_api.requests)} "
        f"incomplete={counts['incomplete']} recorded_unseen={unseen} "
        f"truncated_sends={len(fake_api.requests) - len(received)} events={state.head_seq}"
    )
