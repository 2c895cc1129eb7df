"""One checkpoint: every checkpoint file the gateway writes (`audit checkpoint`, `audit
tree-head`, a receipt, a witnessed copy) serves `verify --checkpoint`, `verify --from/--to`
and witnesses, and files written by today's code keep verifying; a version 1 `audit
checkpoint` file, which signs no tree head, still serves `verify --checkpoint` and is
refused by `--from/--to` with what to do."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import Result

from audit import AuditStore
from audit.proofs.checkpoint import dumps, sign
from tests.audit.conftest import RECORD, Raw, fill
from tests.audit.test_witness import LOG_KEY, LOG_PUBLIC, run, witness_args
from tests.support.standalone import run_standalone


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with AuditStore.open(url, signer=RECORD) as store:
        fill(store, requests=3)
    return url


def _made(url: str, *args: str) -> Result:
    result = run(url, *args)
    assert result.exit_code == 0, result.output
    return result


def _files(url: str, folder: Path) -> dict[str, Path]:
    """One file of each kind, of the log as it is now."""
    files = {k: folder / f"{k}.json" for k in ("checkpoint", "tree-head", "receipt")}
    _made(url, "audit", "checkpoint", "-o", str(files["checkpoint"]))
    _made(url, "audit", "tree-head", "-o", str(files["tree-head"]))
    _made(url, "audit", "prove", "req-1", "-o", str(files["receipt"]))
    return files


def test_verify_from_to_takes_two_audit_checkpoint_files(db: str, tmp_path: Path) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    _made(db, "audit", "checkpoint", "-o", str(old))
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=2)
    _made(db, "audit", "checkpoint", "-o", str(new))
    checked = run(db, "audit", "verify", "--from", str(old), "--to", str(new))
    assert checked.exit_code == 0, checked.output
    assert "consistent: the tree of" in checked.output


@pytest.mark.parametrize("kind", ["checkpoint", "tree-head", "receipt"])
def test_every_checkpoint_file_serves_verify_checkpoint(db: str, tmp_path: Path, kind: str) -> None:
    path = _files(db, tmp_path)[kind]
    with AuditStore.open(db, signer=RECORD) as store:
        fill(store, requests=1)  # the log extends the checkpoint
    ok = run(db, "audit", "verify", "--checkpoint", str(path), "--format", "json")
    assert ok.exit_code == 0, ok.output
    size = (
        json.loads(path.read_text()).get("tree_size")
        or json.loads(path.read_text())["checkpoint"]["tree_size"]
    )
    assert json.loads(ok.output)["checkpoint_seq"] == size
    raw = Raw(db)
    raw.unguard()
    raw.execute("UPDATE events SET hash = ? WHERE seq = 2", ("sha256:" + "cd" * 32,))
    raw.close()
    rewritten = run(db, "audit", "verify", "--checkpoint", str(path), "--format", "json")
    assert rewritten.exit_code == 1
    assert "checkpoint" in {d["kind"] for d in json.loads(rewritten.output)["defects"]}


def test_a_truncated_log_fails_against_a_tree_head(db: str, tmp_path: Path) -> None:
    path = _files(db, tmp_path)["tree-head"]
    raw = Raw(db)
    raw.unguard()
    raw.execute("DELETE FROM events WHERE seq > 4")
    raw.close()
    cut = run(db, "audit", "verify", "--checkpoint", str(path))
    assert cut.exit_code == 1 and "checkpoint names seq" in cut.output


def test_a_witness_cosigns_an_audit_checkpoint_file_and_it_still_verifies(
    db: str, tmp_path: Path
) -> None:
    path = _files(db, tmp_path)["checkpoint"]
    _made(db, *witness_args(path, tmp_path / "w1.json"))
    ok = run(db, "audit", "verify", "--checkpoint", str(path))
    assert ok.exit_code == 0, ok.output


def test_a_version_1_file_still_serves_verify_checkpoint_and_from_to_says_what_to_do(
    db: str, tmp_path: Path
) -> None:
    with AuditStore.open(db, signer=RECORD) as store:
        seq, head = store.head()
        v1 = dumps(sign(store.store_id, seq, head, datetime.now(UTC), LOG_KEY))
    old = tmp_path / "v1.json"
    old.write_text(v1)
    assert '"root"' not in v1
    assert run(db, "audit", "verify", "--checkpoint", str(old)).exit_code == 0
    new = _files(db, tmp_path)["tree-head"]
    refused = run(db, "audit", "verify", "--from", str(old), "--to", str(new))
    assert refused.exit_code == 2
    assert "version 1" in refused.output and "Traceback" not in refused.output


def test_an_audit_checkpoint_file_whose_fields_differ_from_its_note_is_refused(
    db: str, tmp_path: Path
) -> None:
    files = _files(db, tmp_path)
    value = json.loads(files["checkpoint"].read_text())
    value["tree_size"] = value["seq"] = value["tree_size"] - 1
    files["checkpoint"].write_text(json.dumps(value))
    refused = run(db, "audit", "verify", "--from", str(files["checkpoint"]),
                  "--to", str(files["tree-head"]), "--format", "json")  # fmt: skip
    assert refused.exit_code == 1
    assert "differs from its signed note" in refused.output


@pytest.mark.slow
def test_the_standalone_verifier_reads_every_checkpoint_file(db: str, tmp_path: Path) -> None:
    for kind, path in _files(db, tmp_path).items():
        target = path if kind != "receipt" else tmp_path / "receipt-checkpoint.json"
        if kind == "receipt":
            target.write_text(json.dumps(json.loads(path.read_text())["checkpoint"]))
        code, report = run_standalone(tmp_path, "checkpoint", target, "--checkpoint-key",
                                      LOG_PUBLIC)  # fmt: skip
        assert code == 0, (kind, report)
        other, _ = run_standalone(tmp_path, "checkpoint", target, "--checkpoint-key",
                                  RECORD.public_key)  # fmt: skip
        assert other == 1
