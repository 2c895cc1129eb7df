"""An export with content (`audit export --with-content`) verifies only while its content is
what the signed events recorded: each item carries the signed events and payloads it was read
from, and `audit verify --export` checks them. The tamper matrix: an answer changed (where it
is shown, and in its payload too), an item removed, one added, one swapped between requests;
an export without content says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from audit.store.migrate import upgrade
from gateway import Settings
from gateway.cli import main
from gateway.keys import record_signer

SYSTEM = "You review transactions."
BLOCK = "<verdict>BLOCK</verdict>"
PASS = "<verdict>PASS</verdict>"

Rows = list[dict[str, Any]]


def _record(store: AuditStore, rid: str, answer_text: str) -> None:
    rhash = "sha256:" + rid[-1] * 64
    sent = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": f"Pay EUR 9,500 ({rid})"}],
    }
    answer = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": answer_text}],
    }
    common = {"request_id": rid, "task": "kyc", "caller": "svc", "request_hash": rhash}
    store.append(
        EventDraft(
            kind=EventKind.REQUEST,
            data={"model_id": "claude-sonnet-4-6"},
            payloads={"request_body": json.dumps(sent).encode()},
            **common,
        )
    )
    store.append(
        EventDraft(
            kind=EventKind.RESPONSE,
            data={"ok": True},
            payloads={"response_body": json.dumps(answer).encode()},
            **common,
        )
    )


@pytest.fixture
def log(tmp_path: Path) -> tuple[str, Path]:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    assert signer is not None
    with AuditStore.open(url, signer=signer) as store:
        _record(store, "r-1", BLOCK)
        _record(store, "r-2", PASS)
        _record(store, "r-3", BLOCK)
    key = tmp_path / "record.pub"
    key.write_text(signer.public_key + "\n")
    return url, key


def run(url: str, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": url, **(env or {})})


def export(url: str, path: Path, *args: str, env: dict[str, str] | None = None) -> Rows:
    result = run(url, "audit", "export", "-o", str(path), "--reviewer", "a.auditor", *args, env=env)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in path.read_text().splitlines()]


def verify(path: Path, *keys: str) -> Result:
    # No database: the export and the public key only.
    return run("sqlite:////nonexistent/none.db", "audit", "verify", "--export", str(path), *keys)


def report(path: Path, key: Path, *more: str) -> tuple[int, dict[str, Any]]:
    result = verify(path, "--public-key", str(key), *more, "--format", "json")
    return result.exit_code, json.loads(result.stdout)


def write(path: Path, rows: Rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def request_row(rows: Rows, rid: str) -> dict[str, Any]:
    return next(r for r in rows if r.get("kind") == "request" and r["request_id"] == rid)


def defects(found: dict[str, Any]) -> list[tuple[int | None, str, str]]:
    return [(d["seq"], d["kind"], d["detail"]) for d in found["defects"]]


@pytest.fixture
def exported(log: tuple[str, Path], tmp_path: Path) -> tuple[Rows, Path]:
    url, key = log
    rows = export(url, tmp_path / "content.jsonl", "--with-content")
    return rows, key


def test_an_intact_export_with_content_says_what_it_checked(
    exported: tuple[Rows, Path], tmp_path: Path
) -> None:
    rows, key = exported
    path = write(tmp_path / "same.jsonl", rows)
    code, found = report(path, key)
    assert code == 0, defects(found)
    assert found["content_included"] and found["content_checked"] == found["content_expected"] == 3
    text = verify(path, "--public-key", str(key))
    assert text.exit_code == 0, text.output
    assert "content of 3 of 3 request(s)" in text.output


def test_an_export_without_content_says_content_was_not_checked(
    log: tuple[str, Path], tmp_path: Path
) -> None:
    url, key = log
    export(url, tmp_path / "plain.jsonl")
    text = verify(tmp_path / "plain.jsonl", "--public-key", str(key))
    assert text.exit_code == 0, text.output
    assert "content not included" in text.output


def test_an_answer_changed_where_it_is_shown_fails(
    exported: tuple[Rows, Path], tmp_path: Path
) -> None:
    rows, key = exported
    row = request_row(rows, "r-1")
    row["content"]["answer"] = PASS
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    [(seq, kind, detail)] = defects(found)
    assert seq == row["seq"] and kind == "content_mismatch"
    assert "request r-1" in detail and "answer" in detail
    assert found["content_checked"] == 2


def test_an_answer_changed_in_its_payload_too_fails(
    exported: tuple[Rows, Path], tmp_path: Path
) -> None:
    """The whole file edited consistently: every `<verdict>BLOCK` of r-1 made PASS."""
    rows, key = exported
    row = request_row(rows, "r-1")
    row["content"] = json.loads(json.dumps(row["content"]).replace("BLOCK", "PASS"))
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    [(seq, kind, detail)] = defects(found)
    assert seq == row["seq"] and kind == "content_mismatch"
    assert "response_body does not hash to the digest" in detail


def test_an_item_removed_fails(exported: tuple[Rows, Path], tmp_path: Path) -> None:
    rows, key = exported
    del request_row(rows, "r-3")["content"]
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    assert [k for _, k, _ in defects(found)] == ["content_missing"]


def test_an_item_added_fails(exported: tuple[Rows, Path], tmp_path: Path) -> None:
    rows, key = exported
    response = next(r for r in rows if r.get("kind") == "response")
    response["content"] = request_row(rows, "r-1")["content"]
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    assert [k for _, k, _ in defects(found)] == ["content_extra"]


def test_content_added_to_an_export_without_content_fails(
    log: tuple[str, Path], exported: tuple[Rows, Path], tmp_path: Path
) -> None:
    url, key = log
    rows = export(url, tmp_path / "plain.jsonl")
    with_content, _ = exported
    request_row(rows, "r-1")["content"] = request_row(with_content, "r-1")["content"]
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    assert [k for _, k, _ in defects(found)] == ["content_extra"]


def test_items_swapped_between_requests_fail(exported: tuple[Rows, Path], tmp_path: Path) -> None:
    rows, key = exported
    one, two = request_row(rows, "r-1"), request_row(rows, "r-2")
    one["content"], two["content"] = two["content"], one["content"]
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    assert {(seq, kind) for seq, kind, _ in defects(found)} == {
        (one["seq"], "content_mismatch"),
        (two["seq"], "content_mismatch"),
    }


def test_an_answer_left_out_of_its_content_fails(
    exported: tuple[Rows, Path], tmp_path: Path
) -> None:
    """The answer and the event it came from dropped from r-1's content, as if unanswered."""
    rows, key = exported
    row = request_row(rows, "r-1")
    content = row["content"]
    content["evidence"]["events"] = [
        e for e in content["evidence"]["events"] if e["kind"] == "request"
    ]
    del content["evidence"]["payloads"]["response_body"]
    content.update(answer=None, answer_blocks=[], outcome="request", model="claude-sonnet-4-6")
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    [(seq, kind, detail)] = defects(found)
    assert (seq, kind) == (row["seq"], "content_missing") and "leaves out the outcome" in detail
    assert found["content_checked"] == 2


def test_content_without_its_evidence_is_not_taken_on_trust(
    exported: tuple[Rows, Path], tmp_path: Path
) -> None:
    rows, key = exported
    del request_row(rows, "r-2")["content"]["evidence"]
    code, found = report(write(tmp_path / "t.jsonl", rows), key)
    assert code == 1
    assert [k for _, k, _ in defects(found)] == ["content_unverifiable"]


@pytest.mark.postgres
def test_a_format_2_export_with_content_is_checked_too(pg_url: str, tmp_path: Path) -> None:
    from tests.audit.test_sequenced_security import INTEGRATOR, WRITER, WRITER_KEY, integrate

    upgrade(pg_url)
    AuditStore.open(pg_url, log_format=2).close()
    with AuditStore.open(pg_url, signer=WRITER) as store:
        _record(store, "r-1", BLOCK)
        _record(store, "r-2", PASS)
    integrate(pg_url)
    key = tmp_path / "record.pub"
    key.write_text(WRITER.public_key + "\n")
    integrator = tmp_path / "integrator.pub"
    integrator.write_text(INTEGRATOR.public_key + "\n")
    trusted = ("--integrator-public-key", str(integrator))
    env = {"GATEWAY_RECORD_KEY": WRITER_KEY}
    rows = export(pg_url, tmp_path / "content.jsonl", "--with-content", env=env)
    code, found = report(write(tmp_path / "same.jsonl", rows), key, *trusted)
    assert code == 0, defects(found)
    assert found["sequenced_from"] == 1 and found["content_checked"] == 2
    row = request_row(rows, "r-1")
    row["content"] = json.loads(json.dumps(row["content"]).replace("BLOCK", "PASS"))
    code, found = report(write(tmp_path / "t.jsonl", rows), key, *trusted)
    assert code == 1
    assert [(s, k) for s, k, _ in defects(found)] == [(row["seq"], "content_mismatch")]
