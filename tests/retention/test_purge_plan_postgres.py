"""PostgreSQL: the ``erased_content`` guard (migration 0017) finds its erasure event by primary
key, whatever the statistics say, so a purge's per-row cost does not grow with the erasures
recorded before it.

A purge appends its erasure events to a log whose statistics were gathered before any
existed (``kind = 'erasure'``: one row, by the estimate). PL/pgSQL keeps a generic plan of the
guard's query; under 0014 that plan walked the ``kind`` index and filtered every erasure
event so far by seq, once per ``erased_content`` row (bench/results/purge.md). auto_explain
shows the plan the trigger actually runs.
"""

from __future__ import annotations

import re

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.store.erasure import erasure_data
from audit.store.migrate import upgrade
from audit.store.signing import Signer
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

ERASURES = 300


def _log_with_erasures(url: str) -> tuple[int, str]:
    """REQUESTs with content, statistics gathered, then their erasure events (no content
    removed yet): the seq and digest of the last one."""
    with AuditStore.open(url, durability="os", signer=Signer.from_text("77" * 32)) as store:
        requests = store.append_many(
            [
                EventDraft(
                    kind=EventKind.REQUEST,
                    request_id=f"req_{i:04d}",
                    payloads={"request_body": f"pay {i} GBP".encode()},
                )
                for i in range(ERASURES)
            ]
        )
        digests = [store.event(a.seq).payload_digests["request_body"] for a in requests]
        with psycopg.connect(_dsn(url), autocommit=True) as conn:
            conn.execute("ANALYZE events")
        erasures = store.append_many(
            [
                EventDraft(
                    kind=EventKind.ERASURE,
                    request_id=f"req_{i:04d}",
                    data=erasure_data(
                        f"req_{i:04d}", [d], rule="other", reason="t", actor="t", approver="t"
                    ),
                )
                for i, d in enumerate(digests)
            ]
        )
    return erasures[-1].seq, digests[-1]


def _dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.mark.slow
def test_the_erased_content_guard_reads_its_event_by_primary_key(
    postgres_server: PostgresServer, pg_url: str
) -> None:
    upgrade(pg_url)
    seq, digest = _log_with_erasures(pg_url)
    plans: list[str] = []
    with psycopg.connect(_dsn(pg_url)) as conn:
        try:
            conn.execute("LOAD 'auto_explain'")
        except psycopg.Error:
            pytest.skip("auto_explain is not installed with this PostgreSQL")
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        for setting in (
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_analyze = on",
            "client_min_messages = log",
            "plan_cache_mode = force_generic_plan",  # what PL/pgSQL settles on after 5 calls
        ):
            conn.execute(f"SET {setting}")
        conn.execute("INSERT INTO erased_content VALUES (%s, %s)", (digest, seq))
        conn.rollback()
    guard = [p for p in plans if "FROM events e" in p]
    assert guard, plans
    assert "pk_events" in guard[0], guard[0]
    filtered = re.search(r"Rows Removed by Filter: (\d+)", guard[0])
    assert filtered is None or int(filtered.group(1)) < 2, guard[0]
