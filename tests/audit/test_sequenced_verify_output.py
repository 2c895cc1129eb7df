"""`gateway audit verify` on a format-2 log says which integrator keys it trusted, and how
many integrator checkpoints and voids it checked (text and --format json), as a real process.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from tests.audit.test_sequenced_security import (
    GATEWAY,
    INTEGRATOR,
    WRITER,
    WRITER_KEY,
    begin,
    integrate,
)

pytestmark = pytest.mark.postgres


def _verify(url: str, fmt: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "GATEWAY_DATABASE_URL": url, "GATEWAY_RECORD_KEY": WRITER_KEY}
    environ.pop("GATEWAY_INTEGRATOR_PUBLIC_KEYS", None)
    cmd = [str(GATEWAY), "audit", "verify", "--format", fmt]
    return subprocess.run(cmd, env={**environ, **env}, capture_output=True, text=True, timeout=120)


@pytest.fixture
def log(pg_url: str) -> tuple[str, int]:
    """Format 2: two events, a hole the integrator voids, one more; linked and checkpointed.
    The URL and how many integrator checkpoints it holds."""
    begin(pg_url, events=2)
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("SELECT nextval('events_seq')")  # a writer that died after nextval
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="after-the-hole"))
    integrate(pg_url)
    integrate(pg_url)  # the hole is voided once it is older than the grace
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
        voids = conn.execute("SELECT count(*) FROM events WHERE kind = 'void'").fetchone()
        checkpoints = conn.execute("SELECT count(*) FROM chain_checkpoints").fetchone()
    assert voids is not None and voids[0] == 1
    assert checkpoints is not None and checkpoints[0] >= 1
    return pg_url, int(checkpoints[0])


def test_verify_lists_the_integrator_keys_and_counts_in_json_and_text(
    log: tuple[str, int],
) -> None:
    url, checkpoints = log
    env = {"GATEWAY_INTEGRATOR_PUBLIC_KEYS": INTEGRATOR.public_key}
    done = _verify(url, "json", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["integrator_keys"] == [
        {"key_id": INTEGRATOR.key_id, "public_key": INTEGRATOR.public_key}
    ]
    assert [k["key_id"] for k in report["trusted_keys"]] == [WRITER.key_id]
    assert report["integrator_checkpoints_checked"] == checkpoints
    assert report["voids_checked"] == 1
    text = _verify(url, "text", **env)
    assert text.returncode == 0, text.stdout + text.stderr
    assert (
        f"{checkpoints} integrator checkpoint(s) and 1 void(s) checked against 1 integrator "
        f"key(s): {INTEGRATOR.key_id} ({INTEGRATOR.public_key})"
    ) in text.stdout


def test_verify_says_when_no_integrator_key_was_given(log: tuple[str, int]) -> None:
    url, checkpoints = log
    done = _verify(url, "text")
    assert done.returncode == 1  # the integrator's void and checkpoints are untrusted
    assert "Traceback" not in done.stderr
    assert (
        f"{checkpoints} integrator checkpoint(s) and 1 void(s) checked against NO integrator "
        "key: set GATEWAY_INTEGRATOR_PUBLIC_KEYS"
    ) in done.stdout
    report = json.loads(_verify(url, "json").stdout)
    assert report["integrator_keys"] == []
