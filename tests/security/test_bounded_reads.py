"""Nothing read back from the audit database can crash a reader: depth and size are bounded.

The attack: the read-only reviewer role may append ``export`` events (its exports record
themselves), and the chain guard checks their columns and links, not the shape of their
data. One whose data is nested 5,000 levels deep (PostgreSQL's ``jsonb`` accepts it) made
``audit verify``, ``list`` and ``export`` end in a ``RecursionError`` (exit 70) for ever, the
log being append-only. Now such a body is a ``bad_body`` defect naming its seq, and the
readers show its data as unreadable; and the store refuses to write one itself.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from audit import (
    AuditStore,
    ContentMismatch,
    DefectKind,
    EventDraft,
    EventKind,
    InvalidEvent,
    export_events,
    list_requests,
)
from audit.canonical import canonical_bytes, digest
from audit.errors import UnreadableContent
from audit.store import UNREADABLE
from audit.store.bounded import MAX_DATA_DEPTH, MAX_DEPTH, UnreadableJSON, loads, nesting
from audit.store.chain import event_body, link_hash
from audit.store.migrate import upgrade
from audit.store.roles import grant
from audit.verify import verify_log
from gateway._vocabulary import request_status
from tests.audit.conftest import Raw, fill
from tests.audit.test_postgres_roles import _create_role, _owned_database
from tests.support.postgres import PostgresServer
from tests.support.reviewer_rows import review_append

WHEN = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)
DEEP = 5000
INSERT = (
    "INSERT INTO events (seq, event_id, request_id, kind, recorded_at, task, caller, "
    "policy_fingerprint, request_hash, body, prev_hash, hash) "
    "VALUES (?, ?, ?, 'export', ?, NULL, 'auditor', NULL, NULL, ?, ?, ?)"
)


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _export_row(seq: int, prev: str, data_json: bytes) -> tuple[Any, ...]:
    """A well-linked next ``export`` event whose data is ``data_json``, as a reviewer can
    write it by hand (through ``CALL audit_review_append`` on PostgreSQL)."""
    event_id = f"deep{seq}"
    body = event_body(
        seq=seq, event_id=event_id, request_id="export-deep", kind="export", recorded_at=WHEN,
        task=None, caller="auditor", policy_fingerprint=None, request_hash=None,
        durability="fsync", data={"filters": "HOLE"}, payloads={}, policy_ref=None,
    ).replace(b'{"filters":"HOLE"}', data_json)  # fmt: skip
    return (seq, event_id, "export-deep", WHEN, body, prev, link_hash(prev, body))


DEEP_DATA = b'{"filters":' + b"[" * DEEP + b"]" * DEEP + b"}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def deep_log(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[str, int]]:
    """A log of six events, then the reviewer's deep export at seq 7, then one more event.
    Yields (the owner's URL, 7)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'audit.db'}"
        with AuditStore.open(url) as store:
            fill(store)
            seq, prev = store.head()
        raw = Raw(url)
        raw.execute(INSERT, _export_row(seq + 1, prev, DEEP_DATA))
        raw.close()
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        db = _owned_database(server, "audit_owner")
        url = server.url(db, "audit_owner")
        upgrade(url)
        _create_role(server, "auditor")
        grant(url, "auditor", read_only=True)
        with AuditStore.open(url) as store:
            fill(store)
            seq, prev = store.head()
        with psycopg.connect(server.dsn(db, "auditor"), autocommit=True) as conn:
            row = _export_row(seq + 1, prev, DEEP_DATA)
            names = ("seq", "event_id", "request_id", "recorded_at", "body", "prev_hash", "hash")
            review_append(conn, {**dict(zip(names, row, strict=True)), "kind": "export",
                                 "caller": "auditor"})  # fmt: skip
    with AuditStore.open(url) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="after"))
    yield url, seq + 1


def test_an_over_deep_body_is_a_bad_body_defect_naming_its_seq(deep_log: tuple[str, int]) -> None:
    url, seq = deep_log
    with AuditStore.open(url) as store:
        report = verify_log(store)
    assert not report.ok
    bad = [d for d in report.defects if d.kind == DefectKind.BAD_BODY]
    assert [d.seq for d in bad] == [seq]
    assert f"nested {DEEP + 2} levels deep" in bad[0].detail  # body, data, then its own
    assert report.head_seq == seq + 1  # the walk went on past it


def test_list_show_and_export_read_an_over_deep_event(deep_log: tuple[str, int]) -> None:
    url, seq = deep_log
    with AuditStore.open(url) as store:
        events = list(store.iter_events())
        assert [e.seq for e in events] == list(range(1, seq + 2))
        deep = store.event(seq)
        assert deep.kind == EventKind.EXPORT and deep.caller == "auditor"
        assert list(deep.data) == [UNREADABLE]
        assert "nested" in deep.data[UNREADABLE]
        assert json.dumps(deep.json_row())  # renders
        rows = list_requests(store, status=request_status, limit=None)
        assert "export-deep" in [r.request_id for r in rows]
        out = io.StringIO()
        summary = export_events(store, out, "jsonl")
        assert summary.events == seq + 1
        exported = [json.loads(line) for line in out.getvalue().splitlines()]
        assert exported[seq - 1]["body"].encode() == store.event(seq).body  # bytes as hashed


def test_the_cli_reads_an_over_deep_event_without_crashing(deep_log: tuple[str, int]) -> None:
    from gateway.cli import main

    url, _ = deep_log
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_RECORD_KEY": "44" * 32}  # export appends
    runner = CliRunner()
    verify = runner.invoke(main, ["audit", "verify"], env=env)
    assert verify.exit_code == 1, verify.output + verify.stderr
    assert "bad_body" in verify.output
    for args in (
        ["audit", "list"],
        ["audit", "show", "export-deep"],
        ["audit", "show", "export-deep", "--format", "json"],
        ["audit", "export", "--format", "jsonl"],
        ["audit", "export", "--format", "csv"],
    ):
        result = runner.invoke(main, args, env=env)
        assert result.exit_code == 0, (args, result.output, result.stderr)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[AuditStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'audit.db'}"
    else:
        url = request.getfixturevalue("pg_url")
        upgrade(url)
    with AuditStore.open(url) as opened:
        yield opened


def test_over_deep_data_is_refused_on_append(store: AuditStore) -> None:
    for levels in (DEEP, MAX_DATA_DEPTH):  # data {"x": ...} adds one level
        with pytest.raises(InvalidEvent, match=f"more than {MAX_DATA_DEPTH} levels"):
            store.append(
                EventDraft(kind=EventKind.EXPORT, request_id="e", data={"x": _nested(levels)})
            )
    with pytest.raises(InvalidEvent, match="policy content is nested"):
        store.append(
            EventDraft(kind=EventKind.REQUEST, request_id="r", policy_fingerprint="sha256:x",
                       policy_content={"x": _nested(MAX_DEPTH)})
        )  # fmt: skip
    assert store.head()[0] == 0  # nothing written
    # The deepest data the store accepts is data every reader reads back.
    data = {"x": _nested(MAX_DATA_DEPTH - 1)}
    seq = store.append(EventDraft(kind=EventKind.EXPORT, request_id="e", data=data)).seq
    assert nesting(store.event(seq).body.decode()) == MAX_DEPTH
    assert store.event(seq).data == data
    assert verify_log(store).ok


def test_data_larger_than_a_body_may_hold_is_refused(store: AuditStore) -> None:
    with pytest.raises(InvalidEvent, match="Store large content as a payload"):
        store.append(
            EventDraft(kind=EventKind.REQUEST, request_id="r", data={"x": "a" * 5_000_000})
        )
    assert store.head()[0] == 0


def test_a_body_whose_data_is_not_an_object_reads_as_unreadable(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url) as store:
        fill(store, requests=1)
        seq, prev = store.head()
        raw = Raw(url)
        raw.execute(INSERT, _export_row(seq + 1, prev, b"[1]"))
        raw.close()
        event = store.event(seq + 1)
        assert list(event.data) == [UNREADABLE] and event.payload_digests == {}
        assert len(list_requests(store, status=request_status)) == 2


def test_policy_content_is_read_within_bounds_and_checked(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url) as store:
        deep = canonical_bytes({"x": "HOLE"}).replace(b'"HOLE"', b"[" * DEEP + b"]" * DEEP)
        forged = canonical_bytes({"task": "forged"})
        raw = Raw(url)
        insert = "INSERT INTO policies (fingerprint, content) VALUES (?, ?)"
        raw.execute(insert, (digest(deep), deep))
        raw.execute(insert, ("sha256:" + "1" * 64, forged))
        raw.close()
        with pytest.raises(UnreadableContent, match="nested"):
            store.policy_content(digest(deep))
        with pytest.raises(ContentMismatch):
            store.policy_content("sha256:" + "1" * 64)


def test_loads_bounds_depth_and_size_and_types_its_errors() -> None:
    assert nesting('{"a": "[[[[{{{{", "b": [1, {"c": "\\"]]]"}]}') == 3
    assert nesting("") == 0 and nesting('"x"') == 0
    assert loads(b'{"a": [[1]]}', max_depth=3) == {"a": [[1]]}
    for text, limit, why in (
        (b'{"a": [[1]]}', 2, "nested 3 levels deep"),
        (b"[" * 100_000 + b"]" * 100_000, MAX_DEPTH, "nested 100000 levels deep"),
        (b"\xff", MAX_DEPTH, "not UTF-8"),
        (b'{"a": ', MAX_DEPTH, "Expecting value"),
        (b"1" * 5000, MAX_DEPTH, "integer"),  # Python refuses to convert such a literal
    ):
        with pytest.raises(UnreadableJSON, match=why):
            loads(text, max_depth=limit)
    with pytest.raises(UnreadableJSON, match="more than the 10 a reader accepts"):
        loads(b'"' + b"x" * 20 + b'"', max_bytes=10)
