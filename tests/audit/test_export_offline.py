"""An export verifies on its own: `gateway audit verify --export FILE --public-key KEY` checks
every record's hash, columns, links and record signature and the signed EXPORT event at its
end, with the database gone; `audit export --with-content` adds the content, and is recorded
as a content read naming the reviewer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from audit.store.signing import Signer
from gateway import Settings
from gateway.cli import main
from gateway.keys import record_signer

SYSTEM = "You review transactions."
QUESTION = "Pay EUR 9,500 to ACME"
ANSWER = "<verdict>ESCALATE</verdict>"


def _record(store: AuditStore, rid: str, task: str) -> None:
    rhash = "sha256:" + rid[-1] * 64
    sent = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    answer = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": ANSWER}],
    }
    common = {"request_id": rid, "task": task, "caller": "svc", "request_hash": rhash}
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
    """A signed log of three requests, and a file holding the record key's public half."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    assert signer is not None
    with AuditStore.open(url, signer=signer) as store:
        _record(store, "r-1", "kyc")
        _record(store, "r-2", "aml")
        _record(store, "r-3", "kyc")
    key = tmp_path / "record.pub"
    key.write_text(signer.public_key + "\n")
    return url, key


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": url})


def export(url: str, path: Path, *args: str) -> list[dict[str, object]]:
    result = run(url, "audit", "export", "-o", str(path), "--reviewer", "a.auditor", *args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in path.read_text().splitlines()]


def verify(path: Path, key: Path) -> tuple[int, dict[str, object]]:
    # No database: GATEWAY_DATABASE_URL points nowhere that exists.
    result = run("sqlite:////nonexistent/none.db", "audit", "verify", "--export", str(path),
                 "--public-key", str(key), "--format", "json")  # fmt: skip
    return result.exit_code, json.loads(result.stdout)


def write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def kinds(report: dict[str, object]) -> set[str]:
    return {d["kind"] for d in report["defects"]}  # type: ignore[attr-defined,index]


def test_a_whole_export_verifies_offline_and_names_who_exported(
    log: tuple[str, Path], tmp_path: Path
) -> None:
    url, key = log
    rows = export(url, tmp_path / "all.jsonl")
    assert [r["seq"] for r in rows] == list(range(1, 7))
    assert all(r["signature"] and str(r["key_id"]).startswith("ed25519:") for r in rows)
    head = rows[-1]["export_head"]
    assert isinstance(head, dict) and head["kind"] == "export" and head["seq"] == 7
    Path(url.removeprefix("sqlite:///")).unlink()  # the database is gone
    code, report = verify(tmp_path / "all.jsonl", key)
    assert code == 0, report
    assert report["events_checked"] == 6 and report["export_seq"] == 7
    assert report["reviewer"] == "a.auditor" and report["upto_seq"] == 6


def test_text_report_says_intact_and_which_keys(log: tuple[str, Path], tmp_path: Path) -> None:
    url, key = log
    export(url, tmp_path / "all.jsonl")
    result = run(url, "audit", "verify", "--export", str(tmp_path / "all.jsonl"),
                 "--public-key", str(key))  # fmt: skip
    assert result.exit_code == 0
    assert result.stdout.startswith("intact: 6 events (seq 1-6), exported by a.auditor")
    assert "only --public-key keys are trusted" in result.stdout


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        ("body", {"hash_mismatch"}),
        ("column", {"column_mismatch"}),
        ("drop_middle", {"broken_link", "slice_mismatch", "gap"}),
        ("drop_end", {"no_head"}),
        ("drop_last_event", {"slice_mismatch", "gap", "broken_link"}),
        ("signature", {"bad_signature"}),
        ("reorder", {"sequence", "broken_link", "slice_mismatch"}),
        ("head_count", {"hash_mismatch", "column_mismatch", "slice_mismatch"}),
    ],
)
def test_every_alteration_of_an_export_is_named(
    log: tuple[str, Path], tmp_path: Path, tamper: str, expected: set[str]
) -> None:
    url, key = log
    path = tmp_path / "all.jsonl"
    rows = export(url, path)
    if tamper == "body":
        rows[2]["body"] = str(rows[2]["body"]).replace('"svc"', '"evil"')
    elif tamper == "column":
        rows[1]["task"] = "other"
    elif tamper == "drop_middle":
        del rows[2]
    elif tamper == "drop_end":
        rows = rows[:-1]
    elif tamper == "drop_last_event":
        head = rows[-1].pop("export_head")
        rows = rows[:-1]
        rows[-1]["export_head"] = head
    elif tamper == "signature":
        other = Signer.generate()
        rows[0]["signature"] = other.sign(str(rows[0]["hash"]))
    elif tamper == "reorder":
        rows[1], rows[2] = rows[2], rows[1]
    elif tamper == "head_count":
        head = rows[-1]["export_head"]
        assert isinstance(head, dict)
        head["body"] = str(head["body"]).replace('"events":6', '"events":5')
    write(path, rows)
    code, report = verify(path, key)
    assert code == 1
    assert kinds(report) & expected, report["defects"]


def test_an_untrusted_key_fails_every_record(log: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = log
    path = tmp_path / "all.jsonl"
    export(url, path)
    stranger = tmp_path / "stranger.pub"
    stranger.write_text(Signer.generate().public_key + "\n")
    code, report = verify(path, stranger)
    assert code == 1 and kinds(report) == {"untrusted_signer"}


def test_a_filtered_slice_verifies_and_a_dropped_record_does_not(
    log: tuple[str, Path], tmp_path: Path
) -> None:
    url, key = log
    path = tmp_path / "kyc.jsonl"
    rows = export(url, path, "--task", "kyc")
    assert {r["request_id"] for r in rows} == {"r-1", "r-3"}
    code, report = verify(path, key)
    assert code == 0, report
    assert report["filters"] == {"task": "kyc"}
    write(path, rows[:1] + rows[2:])
    code, report = verify(path, key)
    assert code == 1 and "slice_mismatch" in kinds(report)


def test_verify_export_needs_a_public_key(log: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = log
    export(url, tmp_path / "all.jsonl")
    result = run(url, "audit", "verify", "--export", str(tmp_path / "all.jsonl"))
    assert result.exit_code == 2 and "public key" in result.output


def test_an_export_with_content_is_recorded_as_a_content_read(
    log: tuple[str, Path], tmp_path: Path
) -> None:
    url, key = log
    path = tmp_path / "content.jsonl"
    rows = export(url, path, "--task", "kyc", "--with-content")
    requests = [r for r in rows if r["kind"] == "request"]
    assert len(requests) == 2
    for row in requests:
        content = row["content"]
        assert isinstance(content, dict)
        assert content["system"] == SYSTEM and content["answer"] == ANSWER
        assert content["messages"] == [{"role": "user", "content": QUESTION}]
    assert all("content" not in r for r in rows if r["kind"] != "request")
    code, report = verify(path, key)
    assert code == 0, report  # content is an annotation: the hashed records are unchanged
    with AuditStore.open(url) as store:
        access = [e for e in store.iter_events(kind=EventKind.ACCESS)]
    assert len(access) == 1 and access[0].caller == "a.auditor"
    assert access[0].data["export"] == {"format": "jsonl", "filters": {"task": "kyc"}}
    # `audit show` names the export among who has read the content of r-1, not of r-2.
    shown = run(url, "audit", "show", "r-1").stdout
    assert "content read by:" in shown and "a.auditor" in shown
    assert "content read by:" not in run(url, "audit", "show", "r-2").stdout


def test_with_content_needs_jsonl(log: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = log
    result = run(url, "audit", "export", "--format", "csv", "--with-content")
    assert result.exit_code == 2
