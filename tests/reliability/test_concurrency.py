"""Scenario 4: many processes and threads calling the gateway at once on one audit log.

Guarantee (reference/audit.md 6, DESIGN.md §7): one gap-free chain, every request recorded
exactly once with one outcome, and under a ``replay`` policy each distinct request is
answered upstream at most once per process (identical concurrent requests wait and replay).
"""

from __future__ import annotations

import random
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.reliability.helpers import ForkServer, LogState, log_state, run_cli, settings_for
from tests.support.postgres import PostgresServer

THREADS = 8
PROMPTS = [f"Transaction {n}: wire transfer of EUR {1000 * n} to a new payee" for n in range(12)]


def _run(
    fork_server: ForkServer, url: str, policy_dir: Path, processes: int, name: str
) -> tuple[list[dict[str, object]], list[FakeMessagesAPI], LogState]:
    rng = random.Random(11)

    def slow(_request: RecordedRequest) -> Reply:
        return Reply.slow(
            rng.uniform(0.02, 0.08), then=Reply.ok()
        )  # long enough for identical requests to meet

    with ExitStack() as stack:
        fakes = [stack.enter_context(FakeMessagesAPI()) for _ in range(processes)]
        for fake in fakes:
            fake.set_default(slow)
        records = fork_server.run(
            {
                "name": name,
                "settings": settings_for(url, fakes[0].base_url, policy_dir),
                "base_urls": [f.base_url for f in fakes],
                "children": processes,
                "threads": THREADS,
                "overlap": True,
                "shuffle": True,
                "task": "compliance_review",  # replay mode
                # Every child is an instance of one calling service: under the caller-scoped
                # cache they share its recorded answers (another caller would not).
                "caller": "payments-svc",
                "prompts": PROMPTS,
            },
            timeout=180,
        )
    assert not [r for r in records if r["event"] in ("crash", "error")], records
    acks = [r for r in records if r["event"] == "ack"]
    return acks, fakes, log_state(url)


def _check(acks: list[dict[str, object]], fakes: list[FakeMessagesAPI], state: LogState) -> None:
    processes = len(fakes)
    assert state.verified, state.defects
    assert len(acks) == processes * THREADS * len(PROMPTS)
    # Every request exactly once: one id per answer, one outcome event per id.
    ids = [str(a["request_id"]) for a in acks]
    assert len(set(ids)) == len(ids)
    assert set(state.statuses) == set(ids)
    for rid in ids:
        outcomes = [k for k in state.kinds[rid] if k in ("response", "cache_hit")]
        assert len(outcomes) == 1, (rid, state.kinds[rid])
    # The chain: seqs 1..head with no gap (verify checks links; this checks the count).
    assert sum(len(s) for s in state.seqs.values()) == state.head_seq
    # At most one upstream answer per distinct request per process.
    for fake in fakes:
        per_body = Counter(r.body for r in fake.requests)
        # A process may make no call at all: the others may have recorded every answer first.
        assert all(count == 1 for count in per_body.values()), per_body
        assert len(per_body) <= len(PROMPTS)
    upstream = Counter(state.request_hashes[r] for r in ids if "request" in state.kinds[r])
    assert max(upstream.values()) <= processes
    hashes = {str(a["request_hash"]) for a in acks}
    assert len(hashes) == len(PROMPTS)
    cached = sum(1 for a in acks if a["cached"])
    print(
        f"concurrency: processes={processes} threads={THREADS} requests={len(acks)} "
        f"upstream={sum(len(f.requests) for f in fakes)} cached={cached} events={state.head_seq}"
    )


@pytest.mark.slow
def test_four_processes_eight_threads_on_sqlite(
    fork_server: ForkServer, policy_dir: Path, tmp_path: Path
) -> None:
    """4 processes x 8 threads x 12 overlapping identical replay requests, one SQLite file."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    _check(*_run(fork_server, url, policy_dir, 4, "sqlite"))


@pytest.mark.slow
@pytest.mark.postgres
def test_three_gateway_processes_on_one_postgres_database(
    fork_server: ForkServer, postgres_server: PostgresServer, pg_url: str, policy_dir: Path
) -> None:
    """3 processes x 8 threads on PostgreSQL, schema made by ``gateway db upgrade``."""
    code, _out, err = run_cli(["db", "upgrade"], {"GATEWAY_DATABASE_URL": pg_url})
    assert code == 0, err
    _check(*_run(fork_server, pg_url, policy_dir, 3, "postgres"))
