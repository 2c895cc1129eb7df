"""`gateway audit verify --jobs N`: the same report from N worker processes as from one,
and a bad N refused in one line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from gateway.cli import main

pytestmark = pytest.mark.slow  # verify's worker processes (--jobs 2)


def _run(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": url})


def test_jobs_give_the_same_report_and_a_bad_count_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    url = f"sqlite:///{path}"
    with AuditStore.open(url, "os") as store:
        store.append_many([EventDraft(kind=EventKind.EXPORT, request_id=f"e{n}") for n in range(9)])
    with sqlite3.connect(path, isolation_level=None) as raw:
        for (name,) in list(raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")):
            raw.execute(f"DROP TRIGGER {name}")
        raw.execute("UPDATE events SET caller = 'someone-else' WHERE seq = 4")
    one = _run(url, "audit", "verify", "--jobs", "1", "--format", "json")
    two = _run(url, "audit", "verify", "--jobs", "2", "--format", "json")
    assert one.exit_code == two.exit_code == 1, (one.output, two.output)
    assert json.loads(two.stdout) == json.loads(one.stdout)
    found = {(d["seq"], d["kind"]) for d in json.loads(two.stdout)["defects"]}
    assert (4, "column_mismatch") in found  # besides each event unsigned: no record key here
    bad = _run(url, "audit", "verify", "--jobs", "0")
    assert bad.exit_code == 2 and "--jobs" in bad.output and "Traceback" not in bad.output
