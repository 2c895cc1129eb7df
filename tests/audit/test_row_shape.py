"""One shape, one source: the events table defines the row; everything else agrees with it.

The chain-guard trigger (migration 0005), the columns verify compares with the body
(``MIRRORED``), the typed row verify reads (``EventRow``), ``StoredEvent`` and the export
record all name the table's columns; a column added to one and not the others fails here.
"""

from __future__ import annotations

import importlib.util
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import create_engine, select

from audit import AuditStore, EventDraft, EventKind, StoredEvent
from audit.reports.export import COLUMNS
from audit.store._prepare import prepare
from audit.store.chain import GENESIS, MIRRORED, EventRow, event_body, link_hash
from audit.store.models import EXPORT_COLUMNS, SIGNATURE_COLUMNS
from audit.store.schema import EVENT_COLUMNS, EVENTS
from tests.audit.conftest import fill

ROOT = Path(__file__).resolve().parents[2]
CHAIN_GUARD = ROOT / "migrations" / "versions" / "0005_events_chain_guard.py"
# The chain's own columns, the two verify checks against the body in their own way, and the
# record signature (migration 0006), which signs the hash from outside the body.
NOT_MIRRORED = {"seq", "recorded_at", "body", "prev_hash", "hash", *SIGNATURE_COLUMNS}
WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def _chain_guard() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chain_guard_0005", CHAIN_GUARD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_is_the_one_list_of_event_columns() -> None:
    assert tuple(c.name for c in EVENTS.columns) == EVENT_COLUMNS
    assert EventRow._fields == EVENT_COLUMNS
    assert tuple(StoredEvent.model_fields)[: len(EVENT_COLUMNS)] == EVENT_COLUMNS
    assert set(StoredEvent.model_fields) - set(EVENT_COLUMNS) == {"data", "payload_digests"}


def test_mirrored_columns_are_every_column_but_the_chains_own() -> None:
    assert set(MIRRORED) | NOT_MIRRORED == set(EVENT_COLUMNS)
    assert not set(MIRRORED) & NOT_MIRRORED
    body = json.loads(
        event_body(
            seq=1, event_id="e", request_id="r", kind="request", recorded_at=WHEN,
            task=None, caller=None, policy_fingerprint=None, request_hash=None,
            durability="fsync", data={}, payloads={}, policy_ref=None,
        )
    )  # fmt: skip
    assert set(MIRRORED) | {"seq", "recorded_at"} <= set(body)


def test_chain_guard_trigger_checks_the_mirrored_columns_and_names_only_table_columns() -> None:
    source = _chain_guard().BODY
    checked = set(re.findall(r"wrong := wrong \|\| '(\w+)'::text", source))
    assert checked == set(MIRRORED) | {"seq", "recorded_at"}
    for column in checked:
        assert f"b->'{column}'" in source and f"NEW.{column}" in source, column
    # Every column but the signature's (0006), which PL/pgSQL cannot check.
    assert set(re.findall(r"\bNEW\.(\w+)", source)) == set(EVENT_COLUMNS) - set(SIGNATURE_COLUMNS)


def test_the_append_path_writes_every_column_by_name() -> None:
    item = prepare(EventDraft(kind=EventKind.REQUEST, request_id="r"))
    row = item.event_row(1, GENESIS, WHEN, (b'"fsync"', b'"2026-12-01T00:00:00.000000Z"'))
    assert tuple(row) == EVENT_COLUMNS
    assert row["hash"] == link_hash(GENESIS, row["body"])


def test_export_columns_are_the_documented_format() -> None:
    # docs/audit.md "Export": the columns, prev_hash, hash, then body; changing this list
    # changes what reviewers' tools read.
    assert COLUMNS == EXPORT_COLUMNS == (
        "seq", "event_id", "request_id", "kind", "recorded_at", "task", "caller",
        "policy_fingerprint", "request_hash", "prev_hash", "hash", "body",
    )  # fmt: skip


def test_stored_event_renders_its_export_and_json_rows(tmp_path: Path) -> None:
    with AuditStore.open(f"sqlite:///{tmp_path / 'audit.db'}") as store:
        fill(store, requests=1)
        event = store.event(1)
    row = event.export_row()
    assert tuple(row) == EXPORT_COLUMNS
    assert row["kind"] == "request" and row["request_id"] == "req-0"
    assert row["body"].encode() == event.body
    assert row["recorded_at"] == json.loads(event.body)["recorded_at"]
    assert link_hash(row["prev_hash"], row["body"].encode()) == row["hash"]
    json.dumps(row)  # JSON-ready as it is

    view = event.json_row()
    assert tuple(view) == (*(c for c in EXPORT_COLUMNS if c != "body"), "data", "payloads")
    assert view["data"] == {"n": 0} and set(view["payloads"]) == {"request_body"}
    json.dumps(view)


def test_event_rows_are_read_only_from_a_select_of_the_events_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url) as store:
        fill(store, requests=1)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = EventRow.from_result(conn.execute(select(EVENTS)))
            assert [r.seq for r in rows] == [1, 2]
            columns = [EVENTS.c[name] for name in reversed(EVENT_COLUMNS)]
            with pytest.raises(ValueError, match="not a select of the events columns"):
                EventRow.from_result(conn.execute(select(*columns)))
    finally:
        engine.dispose()
