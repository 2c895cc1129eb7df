"""`gateway db` and `gateway audit` through the real CLI entry point (click's CliRunner)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from gateway import Settings
from gateway.cli import main
from gateway.keys import record_signer

KEY = "11" * 32


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "audit.db"
    url = f"sqlite:///{path}"
    # Written as the gateway writes: signed with its record key (the file beside the
    # database), each outcome after its REQUEST, the cache hit naming the RESPONSE it served.
    signer = record_signer(Settings(database_url=url), create=True)
    served = None
    with AuditStore.open(url, signer=signer) as store:
        for rid, outcome in [
            ("r-done", EventKind.RESPONSE),
            ("r-failed", EventKind.FAILED),
            ("r-rejected", EventKind.REJECTED),
            ("r-cached", EventKind.CACHE_HIT),
            ("r-open", None),
        ]:
            task = "pricing" if rid == "r-cached" else "compliance_review"
            rhash = "sha256:" + "d" * 64 if rid in ("r-done", "r-cached") else None
            if outcome is not EventKind.CACHE_HIT and outcome is not EventKind.REJECTED:
                store.append(
                    EventDraft(
                        kind=EventKind.REQUEST, request_id=rid, task=task, caller="svc",
                        request_hash=rhash,
                    )
                )  # fmt: skip
            if rid == "r-failed":
                store.append(
                    EventDraft(
                        kind=EventKind.ATTEMPT_FAILED, request_id=rid, task=task, data={"s": 529}
                    )
                )
            if outcome is not None:
                data = {}
                if outcome is EventKind.CACHE_HIT and served is not None:
                    data = {"served_seq": served.seq, "served_hash": served.hash,
                            "served_request_id": "r-done"}  # fmt: skip
                appended = store.append(
                    EventDraft(
                        kind=outcome, request_id=rid, task=task, caller="svc", data=data,
                        request_hash=rhash,
                    )
                )  # fmt: skip
                if outcome is EventKind.RESPONSE:
                    served = appended
    return url, path


def run(url: str, *args: str, key: str | None = None) -> Result:
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_CHECKPOINT_KEY": key or ""}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_db_upgrade_and_current(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    before = run(url, "db", "current")
    assert "revision none" in before.output and "gateway db upgrade" in before.output
    assert run(url, "db", "upgrade").exit_code == 0
    assert "up to date" in run(url, "db", "current").output


def test_list_shows_one_row_per_request_with_status(db: tuple[str, Path]) -> None:
    url, _ = db
    result = run(url, "audit", "list", "--format", "json")
    assert result.exit_code == 0, result.output
    status = {r["request_id"]: r["status"] for r in json.loads(result.output)}
    assert status == {
        "r-done": "completed",
        "r-failed": "failed",
        "r-rejected": "rejected",
        "r-cached": "cache hit",
        "r-open": "incomplete",
    }
    table = run(url, "audit", "list").output
    assert "incomplete" in table and "cache hit" in table
    only = run(url, "audit", "list", "--task", "pricing", "--format", "jsonl").output
    assert [json.loads(line)["request_id"] for line in only.splitlines()] == ["r-cached"]
    failed = run(url, "audit", "list", "--kind", "attempt_failed", "--format", "jsonl").output
    assert [json.loads(line)["request_id"] for line in failed.splitlines()] == ["r-failed"]
    assert (
        len(run(url, "audit", "list", "--limit", "2", "--format", "jsonl").output.splitlines()) == 2
    )
    future = run(url, "audit", "list", "--since", "2999-01-01", "--format", "json").output
    assert json.loads(future) == []


def test_show_tells_a_requests_whole_life(db: tuple[str, Path]) -> None:
    url, _ = db
    result = run(url, "audit", "show", "r-failed", "--format", "json")
    kinds = [e["kind"] for e in json.loads(result.output)["events"]]
    assert kinds == ["request", "attempt_failed", "failed"]
    text = run(url, "audit", "show", "r-failed").output
    assert "attempt_failed" in text and "s: 529" in text
    missing = run(url, "audit", "show", "nope")
    assert missing.exit_code == 2 and "gateway audit list" in missing.output


def test_verify_names_a_break_made_by_hand_with_sqlite(db: tuple[str, Path]) -> None:
    url, path = db
    assert run(url, "audit", "verify").exit_code == 0
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET body = replace(body, 'svc', 'SVC') WHERE seq = 3")
    result = run(url, "audit", "verify")
    assert result.exit_code == 1
    assert "first bad seq 3" in result.output
    report = json.loads(run(url, "audit", "verify", "--format", "json").output)
    assert report["ok"] is False and report["defects"][0]["seq"] == 3


def test_checkpoint_then_truncation_is_caught(db: tuple[str, Path], tmp_path: Path) -> None:
    url, path = db
    cp_file = tmp_path / "head.json"
    made = run(url, "audit", "checkpoint", "-o", str(cp_file), key=KEY)
    assert made.exit_code == 0, made.output
    assert run(url, "audit", "verify", "--checkpoint", str(cp_file), key=KEY).exit_code == 0
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER events_no_delete")
        conn.execute("DELETE FROM events WHERE seq >= 8")
    assert run(url, "audit", "verify").exit_code == 0  # the chain alone cannot see it
    result = run(url, "audit", "verify", "--checkpoint", str(cp_file), key=KEY)
    assert result.exit_code == 1 and "truncation or rollback" in result.output


def test_checkpoint_needs_a_key_and_refuses_another_one(
    db: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = db
    no_key = run(url, "audit", "checkpoint")
    assert no_key.exit_code == 2 and "GATEWAY_CHECKPOINT_KEY" in no_key.output
    bad_key = run(url, "audit", "checkpoint", key="secret")
    assert bad_key.exit_code == 2 and "not usable" in bad_key.output
    assert "Traceback" not in bad_key.output
    cp_file = tmp_path / "head.json"
    run(url, "audit", "checkpoint", "-o", str(cp_file), key=KEY)
    other = run(url, "audit", "verify", "--checkpoint", str(cp_file), key="22" * 32)
    assert other.exit_code == 2
    assert other.output.count("\n") == 1 and "another key" in other.output


def test_export_is_recorded_and_carries_the_hashed_bytes(db: tuple[str, Path]) -> None:
    url, _ = db
    with AuditStore.open(url) as store:
        head = store.head()[0]
    jsonl = run(url, "audit", "export", "--format", "jsonl")
    assert jsonl.exit_code == 0
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert [r["seq"] for r in rows] == list(range(1, head + 1))
    from audit.store.chain import link_hash

    assert all(link_hash(r["prev_hash"], r["body"].encode()) == r["hash"] for r in rows)
    with AuditStore.open(url) as store:
        recorded = store.event(head + 1)
    assert recorded.kind == EventKind.EXPORT and recorded.data["format"] == "jsonl"
    as_csv = run(url, "audit", "export", "--format", "csv", "--task", "pricing").stdout
    parsed = list(csv.DictReader(io.StringIO(as_csv)))
    assert {r["request_id"] for r in parsed} == {"r-cached"}


def test_unopenable_database_is_one_line_exit_4(tmp_path: Path) -> None:
    bad = tmp_path / "junk.db"
    bad.write_bytes(b"junk" * 1000)
    result = run(f"sqlite:///{bad}", "audit", "list")
    assert result.exit_code == 4
    assert result.output.startswith("error: cannot open the audit database")
    assert result.output.count("\n") == 1


def test_show_json_is_the_stored_events_json_row(db: tuple[str, Path]) -> None:
    url, _ = db
    shown = json.loads(run(url, "audit", "show", "r-failed", "--format", "json").output)
    with AuditStore.open(url) as store:
        stored = store.events_for_request("r-failed")
    # Beside the events: what the caller brought (issue 23's coverage), read from them.
    assert shown.pop("coverage") == {"contract": None, "caller_supplied": []}
    assert shown.pop("policy_version") is None  # no policy version recorded for it
    assert shown == {"request_id": "r-failed", "events": [e.json_row() for e in stored]}
