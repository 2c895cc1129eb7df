"""An export of a log with a format-2 part verifies offline (`gateway audit verify --export`):
format-2 records stand alone (hash = sha256(body), a signature naming the log's store id),
their links come with them, and the integrator's checkpoints and voids are checked against
its public keys. One tampered record, link or checkpoint is refused with its reason.

The log: seqs 1-2 in format 1, then format 2: three requests, a hole the integrator voids,
all linked and checkpointed; then two events still pending integration.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from audit.proofs import checkpoint as cp
from audit.store.migrate import upgrade
from audit.store.sequenced import chain_link
from gateway.cli import main
from tests.audit.test_sequenced_security import (
    INTEGRATOR,
    INTEGRATOR_KEY,
    WRITER,
    WRITER_KEY,
    integrate,
    role,
)
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

Rows = list[dict[str, Any]]


def run(url: str, *args: str) -> Result:
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_RECORD_KEY": WRITER_KEY}
    return CliRunner().invoke(main, list(args), env=env)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    record, integrator = tmp_path / "record.pub", tmp_path / "integrator.pub"
    record.write_text(WRITER.public_key + "\n")
    integrator.write_text(INTEGRATOR.public_key + "\n")
    return record, integrator


@pytest.fixture
def log(pg_url: str) -> str:
    upgrade(pg_url)
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r0"))
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id="r0"))
    AuditStore.open(pg_url, log_format=2).close()
    with AuditStore.open(pg_url, signer=WRITER) as store:
        for n in range(1, 4):
            store.append(EventDraft(kind=EventKind.REQUEST, request_id=f"r{n}", task="kyc"))
            if n == 2:
                with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as conn:
                    conn.execute("SELECT nextval('events_seq')")  # a writer that died
            store.append(EventDraft(kind=EventKind.RESPONSE, request_id=f"r{n}", task="kyc"))
    integrate(pg_url)  # waits out the hole's grace, voids it, links on
    with AuditStore.open(pg_url, signer=WRITER) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r4", task="kyc"))
        store.append(EventDraft(kind=EventKind.RESPONSE, request_id="r4", task="kyc"))
    return pg_url


def export(url: str, path: Path, *args: str) -> Rows:
    result = run(url, "audit", "export", "-o", str(path), "--reviewer", "a.auditor", *args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in path.read_text().splitlines()]


def verify(path: Path, *keys: Path) -> tuple[int, dict[str, Any]]:
    record, *integrator = keys
    args = ["--public-key", str(record)]
    if integrator:
        args += ["--integrator-public-key", str(integrator[0])]
    # No database: GATEWAY_DATABASE_URL points nowhere that exists.
    result = run("sqlite:////nonexistent/none.db", "audit", "verify", "--export", str(path),
                 *args, "--format", "json")  # fmt: skip
    return result.exit_code, json.loads(result.stdout)


def write(path: Path, rows: Rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def found(report: dict[str, Any]) -> list[tuple[int | None, str, str]]:
    return [(d["seq"], d["kind"], d["detail"]) for d in report["defects"]]


def at(rows: Rows, seq: int) -> dict[str, Any]:
    return next(r for r in rows if r.get("seq") == seq)


def test_an_export_with_a_format_2_part_verifies_offline(
    log: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    path = tmp_path / "all.jsonl"
    rows = export(log, path)
    assert [r["seq"] for r in rows] == list(range(1, 12))  # the void at 6 included
    assert "link" not in rows[0] and rows[2]["link_prev"] == rows[1]["hash"]
    assert at(rows, 6)["kind"] == "void" and at(rows, 6)["key_id"] == INTEGRATOR.key_id
    assert at(rows, 11)["link"] is None  # pending integration
    assert sum("integrator_checkpoint" in r for r in rows) >= 1
    code, report = verify(path, *keys)
    assert code == 0, found(report)
    assert report["sequenced_from"] == 3 and report["upto_seq"] == 11
    assert report["integrator_keys"] == [INTEGRATOR.key_id]
    assert report["voids_checked"] == 1 and report["pending_integration"] == 2
    assert report["integrator_checkpoints_checked"] >= 1
    assert report["checkpoint_roots_checked"] == report["integrator_checkpoints_checked"]
    text = run("sqlite:////nonexistent/none.db", "audit", "verify", "--export", str(path),
               "--public-key", str(keys[0]), "--integrator-public-key", str(keys[1]))  # fmt: skip
    assert text.exit_code == 0, text.output
    assert "format 2 from seq 3" in text.stdout and "1 void(s) checked against" in text.stdout


def test_a_filtered_export_verifies_and_its_links_are_checked(
    log: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    path = tmp_path / "kyc.jsonl"
    rows = export(log, path, "--task", "kyc")
    assert {r["seq"] for r in rows} == {3, 4, 5, 7, 8, 9, 10, 11}
    code, report = verify(path, *keys)
    assert code == 0, found(report)
    assert report["checkpoint_roots_checked"] == 0  # not every leaf is in a filtered slice
    rows[1]["link"] = rows[2]["link"]
    write(path, rows)
    code, report = verify(path, *keys)
    assert code == 1 and found(report)[0][:2] == (4, "hash_mismatch")


def _store_id(rows: Rows) -> str:
    return str(json.loads(rows[-1]["export_head"]["body"])["data"]["store_id"])


def _forged_checkpoint(
    rows: Rows, seq: int, key: str, root: bytes, store_id: str | None = None
) -> dict[str, Any]:
    signed = cp.sign(store_id or _store_id(rows), seq, at(rows, seq)["link"], datetime.now(UTC),
                     bytes.fromhex(key), root=root)  # fmt: skip
    return json.loads(cp.dumps(signed))


def _tamper(rows: Rows, how: str) -> None:
    linked = max(r["seq"] for r in rows if r.get("link"))
    if how == "body":  # re-hashed as sha256(body): only the signature can tell
        row = at(rows, 7)
        row["body"] = row["body"].replace('"r2"', '"rX"')
        row["request_id"] = "rX"
        row["hash"] = "sha256:" + hashlib.sha256(row["body"].encode()).hexdigest()
    elif how == "link":
        at(rows, 5)["link"] = "sha256:" + "0" * 64
    elif how == "link-prev":  # a self-consistent link that does not follow seq 4's
        row = at(rows, 5)
        row["link_prev"] = at(rows, 3)["link"]
        row["link"] = chain_link(row["link_prev"], row["hash"])
    elif how == "link-dropped":
        at(rows, 4)["link"] = at(rows, 4)["link_prev"] = None
    elif how == "checkpoint-altered":
        carried = at(rows, linked)["integrator_checkpoint"]
        carried["created_at"] = "2020-01-01T00:00:00Z"
    elif how == "checkpoint-by-a-record-key":
        carried = _forged_checkpoint(rows, linked, WRITER_KEY, b"\0" * 32)
        at(rows, linked)["integrator_checkpoint"] = carried
    elif how == "checkpoint-root":  # signed by the integrator key (a fooled integrator)
        carried = _forged_checkpoint(rows, linked, INTEGRATOR_KEY, b"\0" * 32)
        at(rows, linked)["integrator_checkpoint"] = carried
    elif how == "prev-hash":  # a format-2 record dressed as a format-1 one
        at(rows, 8)["prev_hash"] = at(rows, 7)["hash"]
    elif how == "checkpoint-of-another-log":  # the same integrator key serves two logs
        carried = at(rows, linked)["integrator_checkpoint"]
        root = base64.b64decode(carried["root"])
        forged = _forged_checkpoint(rows, linked, INTEGRATOR_KEY, root, store_id="other-log")
        at(rows, linked)["integrator_checkpoint"] = forged
    elif how == "checkpoint-moved":  # to the record before its size
        at(rows, linked - 1)["integrator_checkpoint"] = at(rows, linked).pop(
            "integrator_checkpoint"
        )
    elif how == "checkpoint-on-pending":
        at(rows, linked + 1)["integrator_checkpoint"] = at(rows, linked).pop(
            "integrator_checkpoint"
        )
    elif how == "integrator-signed-answer":  # re-signed by the integrator key, store id right
        row = at(rows, 7)
        row["signature"] = INTEGRATOR.sign(row["hash"], sequenced=True, store_id=_store_id(rows))
        row["key_id"] = INTEGRATOR.key_id
    elif how == "link-not-text":
        at(rows, 5)["link"] = 5
    elif how == "not-ascii":  # untrusted text: a defect, never a crash
        at(rows, 2)["prev_hash"] = "sha256:é"
        at(rows, 4)["link_prev"] = "sha256:é"


@pytest.mark.parametrize(
    ("how", "expected", "reason"),
    [
        ("body", (7, "bad_signature"), "does not check out"),
        ("link", (5, "hash_mismatch"), "its link is not sha256(link_prev ‖ hash)"),
        ("link-prev", (5, "broken_link"), "does not follow the previous one"),
        ("link-dropped", (4, "broken_link"), "but its record carries no link"),
        ("checkpoint-altered", (None, "checkpoint"), "does not match its contents"),
        ("checkpoint-by-a-record-key", (None, "checkpoint"), "signed by a record key"),
        ("checkpoint-root", (None, "checkpoint"), "not the Merkle root of the exported"),
        ("prev-hash", (8, "hash_mismatch"), "a format-2 event carries a prev_hash"),
        ("link-dropped", (5, "broken_link"), "it is linked after a seq that is not"),
        ("checkpoint-of-another-log", (None, "checkpoint"), "checkpoint is of another log"),
        ("checkpoint-moved", (None, "checkpoint"), "checkpoint names another head"),
        ("checkpoint-on-pending", (10, "checkpoint"), "an integrator checkpoint on an unlinked"),
        ("integrator-signed-answer", (7, "untrusted_signer"), "may sign only voids"),
        ("link-not-text", (5, "bad_record"), "link_prev and link must be text"),
        ("not-ascii", (2, "hash_mismatch"), "hash is not sha256(prev_hash || body)"),
        ("not-ascii", (4, "hash_mismatch"), "its link is not sha256(link_prev ‖ hash)"),
    ],
)
def test_one_tampered_record_in_the_export_is_refused_with_its_reason(
    log: str,
    keys: tuple[Path, Path],
    tmp_path: Path,
    how: str,
    expected: tuple[int | None, str],
    reason: str,
) -> None:
    path = tmp_path / "all.jsonl"
    rows = export(log, path)
    _tamper(rows, how)
    write(path, rows)
    code, report = verify(path, *keys)
    assert code == 1
    assert any(
        seq == (expected[0] or seq) and kind == expected[1] and reason in detail
        for seq, kind, detail in found(report)
    ), found(report)


def test_without_the_integrator_key_its_void_and_checkpoints_are_refused(
    log: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    path = tmp_path / "all.jsonl"
    export(log, path)
    code, report = verify(path, keys[0])
    assert code == 1
    assert report["integrator_keys"] == []
    assert {(d[0], d[1]) for d in found(report)} >= {(6, "untrusted_signer")}
    assert any(d[1] == "checkpoint" and "untrusted key" in d[2] for d in found(report)), found(
        report
    )


def test_integrator_keys_are_for_export_only(log: str, keys: tuple[Path, Path]) -> None:
    result = run(log, "audit", "verify", "--integrator-public-key", str(keys[1]))
    assert result.exit_code == 2 and "is for --export" in result.output


def test_an_export_covers_the_settled_head_so_a_hole_filled_meanwhile_changes_nothing(
    log: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    """A seq reserved by a writer still in flight (12), an event committed after it (13):
    the export covers seq 1-11, and the writer's commit at 12 while the export is being
    written (here from inside its second read) leaves the slice it counted unchanged."""
    from audit.canonical import canonical_bytes
    from audit.reports.export import export_events
    from audit.store.sequenced import void_row

    with psycopg.connect(log.replace("+psycopg", ""), autocommit=True) as conn:
        hole = int(conn.execute("SELECT nextval('events_seq')").fetchone()[0])  # type: ignore[index]
    with AuditStore.open(log, signer=WRITER) as store:
        after = store.append(EventDraft(kind=EventKind.REQUEST, request_id="r5")).seq
        assert (hole, after) == (12, 13)
        filled: list[int] = []

        def fill_the_hole(event: Any) -> None:
            if not filled:  # the writer in flight commits (here: voids) its seq
                row = void_row(hole, WRITER, "rolled back", canonical_bytes("fsync"),
                               store_id=store.store_id)  # fmt: skip
                with psycopg.connect(log.replace("+psycopg", ""), autocommit=True) as conn:
                    columns = ", ".join(row)
                    values = ", ".join(["%s"] * len(row))
                    conn.execute(f"INSERT INTO events ({columns}) VALUES ({values})",
                                 list(row.values()))  # fmt: skip
                filled.append(hole)
            return None

        path = tmp_path / "all.jsonl"
        with path.open("w") as out:
            summary = export_events(store, out, "jsonl", annotate=fill_the_hole)
    assert filled and summary.upto_seq == 11 and summary.events == 11
    code, report = verify(path, *keys)
    assert code == 0, found(report)
    assert report["last_seq"] == 11


def test_a_chain_row_planted_far_ahead_does_not_make_the_export_claim_links(
    log: str, keys: tuple[Path, Path], tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """A row in `chain` far above the linked prefix (the integrator role's; verify names it
    outside_chain): the export still covers the settled head and records the integrator's
    real linked head, so its pending records are not called links that went missing."""
    dsn = role(postgres_server, log, "export_plant", integrator=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO chain VALUES (1000000, 'x', 'y')")
    path = tmp_path / "all.jsonl"
    rows = export(log, path)
    data = json.loads(rows[-1]["export_head"]["body"])["data"]
    assert (data["upto_seq"], data["linked_seq"]) == (11, 9)
    code, report = verify(path, *keys)
    assert code == 0, found(report)


def test_an_export_with_content_of_a_format_2_log_verifies_offline(
    log: str, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    path = tmp_path / "content.jsonl"
    rows = export(log, path, "--with-content")
    assert any("content" in r for r in rows)
    code, report = verify(path, *keys)
    assert code == 0, found(report)
