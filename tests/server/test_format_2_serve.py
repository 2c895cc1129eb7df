"""`gateway serve` with GATEWAY_AUDIT_FORMAT=2 (real processes, real PostgreSQL): its two
workers begin format 2 as they start (once between them) and record every call in it;
`gateway audit integrate --once` links them and `gateway audit verify` passes."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from audit import AuditStore
from audit.store.signing import Signer
from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import running_server
from tests.server.test_lifecycle import ask

pytestmark = pytest.mark.slow  # `gateway serve` as a process

INTEGRATOR_KEY = "6c" * 32


@pytest.mark.postgres
def test_serve_with_format_2_begins_it_and_its_calls_verify_once_integrated(
    tmp_path: Path, pg_url: str
) -> None:
    env = {
        "GATEWAY_DATABASE_URL": pg_url,
        "GATEWAY_RECORD_KEY": "6d" * 32,
        "GATEWAY_AUDIT_FORMAT": "2",
        "GATEWAY_INTEGRATOR_KEY": INTEGRATOR_KEY,
        "GATEWAY_INTEGRATOR_PUBLIC_KEYS": Signer.from_text(INTEGRATOR_KEY).public_key,
    }
    with (
        FakeMessagesAPI() as fake,
        running_server(tmp_path, fake, "--workers", "2", **env) as server,
    ):
        with AuditStore.open(pg_url, create=False) as store:
            assert store.sequenced_from == 1  # begun by the workers, before any other command
        key = server.create_key("quant-desk")
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda n: ask(server, key, n), range(32)))
        server.stop()
    events = server.audit_events()
    assert all(e.prev_hash == "" for e in events)  # format 2 from the first event on
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.event_id for e in events}) == len(events)
    per_request = Counter((e.request_id, str(e.kind)) for e in events if e.request_id in set(ids))
    assert Counter(kind for _id, kind in per_request) == {"request": 32, "response": 32}
    assert set(per_request.values()) == {1}
    integrated = server.cli("audit", "integrate", "--once", "--format", "json")
    assert f'"head": {len(events)}' in integrated.stdout
    done = server.verify()
    assert done.returncode == 0, done.stdout + done.stderr
