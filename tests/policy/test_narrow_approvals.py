"""One unapproved policy edit refuses that task alone: with GATEWAY_REQUIRE_APPROVALS=2, a
task whose prompt changed after two approvals is refused with a typed error naming the task,
its fingerprint and the approvals it lacks, each refusal recorded as a REJECTED event; the
other tasks serve; the gateway logs at start which tasks it refuses; `policy review` says the
same. An unapproved routing table refuses routing only."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from structlog.testing import capture_logs

from audit import AuditStore, EventKind
from audit.store.signing import Signer
from gateway import Gateway, PolicyNotApproved, Settings
from gateway.cli import main
from tests.policy.conftest import VALID, WriteFolder

ALICE, BOB = (secrets.token_hex(32) for _ in range(2))


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()
    return url


@pytest.fixture
def pins(tmp_path: Path) -> Path:
    path = tmp_path / "approvers.toml"
    alice, bob = (Signer.from_text(k).public_key for k in (ALICE, BOB))
    path.write_text(f'alice = "{alice}"\nbob = "{bob}"\n', encoding="utf-8")
    return path


def run(db: str, *args: str, **env: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": db, **env})


def approve(db: str, folder: Path, task: str) -> None:
    for name, key in (("alice", ALICE), ("bob", BOB)):
        done = run(db, "policy", "approve", task, "--approver", name, "--policy-dir",
                   str(folder), GATEWAY_APPROVER_KEY=key)  # fmt: skip
        assert done.exit_code == 0, done.output


def test_an_edited_task_is_refused_alone_and_each_refusal_is_recorded(
    write_folder: WriteFolder, db: str, pins: Path
) -> None:
    folder = write_folder(
        {
            "task_a.toml": VALID,
            "task_b.toml": VALID.replace("prompts/system.md", "prompts/b.md"),
            "prompts/system.md": "Answer briefly.",
            "prompts/b.md": "Answer in one word.",
        }
    )
    approve(db, folder, "task_a")
    approve(db, folder, "task_b")
    (folder / "prompts" / "b.md").write_text("Answer in two words.")  # not approved
    settings = Settings(
        policy_dir=folder,
        database_url=db,
        require_approvals=2,
        durability="os",
        trusted_approvers_file=pins,
    )
    with capture_logs() as logs, Gateway(settings, offline=True) as gw:
        assert gw.policies.withheld() == ["task_b"]
        assert gw.complete("task_a", "The reviewer reads the", caller="desk-1").text is not None
        for _ in range(2):
            with pytest.raises(PolicyNotApproved) as refused:
                gw.complete("task_b", "The reviewer reads the", caller="desk-2")
    error = refused.value
    assert error.task == "task_b" and error.fingerprint.startswith("sha256:")
    assert error.required == 2 and error.missing == 2 and error.approvers == ()
    assert f"task 'task_b' is refused: its version {error.fingerprint} has 0 of the 2" in (
        error.message
    )
    started = [e for e in logs if e["event"] == "task_refused_unapproved"]
    assert [(e["task"], e["fingerprint"]) for e in started] == [("task_b", error.fingerprint)]
    with AuditStore.open(db) as store:
        rejected = list(store.iter_events(kind=EventKind.REJECTED))
    assert [(e.task, e.caller) for e in rejected] == [("task_b", "desk-2")] * 2
    assert rejected[-1].request_id == error.request_id

    env = {"GATEWAY_REQUIRE_APPROVALS": "2", "GATEWAY_TRUSTED_APPROVERS_FILE": str(pins)}
    review = json.loads(run(db, "policy", "review", str(folder), "--format", "json", **env).output)
    short = [t["task"] for t in review["tasks"] if len(t["approvals"]["approvers"]) < 2]
    assert short == ["task_b"]
    fingerprints = {t["task"]: t["approvals"]["fingerprint"] for t in review["tasks"]}
    assert fingerprints["task_b"] == error.fingerprint
