"""A caller's own system prompt and tools are content like its messages: the REQUEST's data
names them by size alone, the sealed ``overrides`` payload holds them, and erasing the
request leaves none of their text anywhere in the database file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gateway import Gateway, Settings
from gateway.evidence import Auditing, Erasing
from tests.fakes.messages_api import FakeMessagesAPI, Reply

SUBJECT = "customer-118204"
SECRET = "Client Jane Roe holds account 4711"
TOOLS = [
    {
        "name": "lookup_trades",
        "description": "Finds the trades of Jane Roe's account",
        "input_schema": {"type": "object"},
    }
]


def _everything(db_path: Path) -> bytes:
    """Every value of every row of every table, as bytes."""
    out = []
    with sqlite3.connect(db_path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                out.extend(v if isinstance(v, bytes) else str(v).encode() for v in row)
    return b"\n".join(out)


def test_erasing_a_request_erases_the_callers_own_system_prompt_and_tools(
    gw: Gateway,
    erasing: Erasing,
    settings: Settings,
    db_path: Path,
    fake_api: FakeMessagesAPI,
) -> None:
    fake_api.script(Reply.ok(text="Noted."))
    gw.complete(
        "general_assistant",
        messages=[{"role": "user", "content": "Summarise the desk's week."}],
        overrides={"system": SECRET, "tools": TOOLS},
        subject=SUBJECT,
    )
    with sqlite3.connect(db_path) as db:
        bodies = b"".join(r[0] for r in db.execute("SELECT body FROM events"))
    assert b"Jane Roe" not in bodies  # content, not event data: no erasure could reach it there
    assert b"Jane Roe" in _everything(db_path)  # in the payloads, until erased

    erasing.erase_subject(SUBJECT, reason="DSAR-12", actor="j", approver="dpo")
    assert b"Jane Roe" not in _everything(db_path)
    assert b"Jane Roe" not in db_path.read_bytes()  # secure_delete: no free page keeps it
    with Auditing.open(settings) as auditing:
        assert auditing.verify().ok
