"""`gateway audit verify` lists the first defects and says how many it left out."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from gateway import Settings
from gateway.cli import main
from gateway.keys import record_signer

EVENTS = 60


def test_verify_says_how_many_defects_it_did_not_print(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    url = f"sqlite:///{path}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:
        for n in range(EVENTS):
            store.append(
                EventDraft(kind=EventKind.REQUEST, request_id=f"r-{n}", task="t", caller="svc")
            )
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET body = replace(body, 'svc', 'SVC')")
    env = {"GATEWAY_DATABASE_URL": url}
    report = json.loads(
        CliRunner().invoke(main, ["audit", "verify", "--format", "json"], env=env).output
    )
    total = len(report["defects"])
    assert total > 50
    text = CliRunner().invoke(main, ["audit", "verify"], env=env)
    assert text.exit_code == 1
    listed = [line for line in text.output.splitlines() if line.startswith("  seq ")]
    assert len(listed) == 50
    assert f"{total - 50} more defects not shown" in text.output
    assert "--format json" in text.output
