"""A policy folder and a task name are input too: each odd case is a finding or a typed,
recorded error, never a hang, a silent load or a TypeError.

- a task given as a list (or a dict) is an UnknownTask, recorded REJECTED;
- a policy file whose name makes a task longer than the log records does not load (a
  finding), and a request to it is refused and recorded, not "provider failed" unrecorded;
- a policy file that is a link to a file outside the folder does not load (a finding);
- a FIFO named as a system prompt is a finding; `policy review` does not wait on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway import Gateway, Settings
from gateway.catalog import Catalog
from gateway.errors import PolicyLoadError, UnknownTask
from gateway.policy import PolicySet
from tests.gateway.conftest import events

ROOT = Path(__file__).resolve().parents[2]
TASK = "offline_demo"


def offline(policy_dir: Path, db_path: Path) -> Gateway:
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}", durability="os")
    return Gateway(settings, offline=True)


def findings_of(policy_dir: Path, file_name: str) -> list[str]:
    loaded = PolicySet.load(policy_dir, Catalog.load())
    return [f"{f.rule}: {f.message}" for f in loaded.findings if f.file == file_name]


@pytest.mark.parametrize("task", [[TASK], {"task": TASK}])
def test_a_task_that_is_not_a_name_is_an_unknown_task_recorded(
    policy_dir: Path, db_path: Path, task: object
) -> None:
    with offline(policy_dir, db_path) as gw, pytest.raises(UnknownTask, match="policy's name"):
        gw.complete(task, "hello", caller="desk-a")  # type: ignore[arg-type]
    assert [str(e.kind) for e in events(db_path)] == ["rejected"]


def test_a_task_name_longer_than_the_log_records_does_not_load_and_is_refused_on_record(
    policy_dir: Path, db_path: Path
) -> None:
    name = "t" * 220
    text = (policy_dir / f"{TASK}.toml").read_text()
    (policy_dir / f"{name}.toml").write_text(text)
    assert any("task-name-too-long" in f for f in findings_of(policy_dir, f"{name}.toml"))
    with offline(policy_dir, db_path) as gw, pytest.raises(PolicyLoadError):
        gw.complete(name, "hello", caller="desk-a")
    [event] = events(db_path)
    assert str(event.kind) == "rejected" and event.task == name[:200]


def test_a_policy_file_linked_from_outside_the_folder_does_not_load(
    policy_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.toml"
    shutil.copy(policy_dir / f"{TASK}.toml", outside)
    (policy_dir / "linked_task.toml").symlink_to(outside)
    found = findings_of(policy_dir, "linked_task.toml")
    assert any("file-outside-folder" in f for f in found), found
    loaded = PolicySet.load(policy_dir, Catalog.load())
    assert "linked_task" not in [p.task for p in loaded.policies()]


@pytest.mark.slow  # the CLI as a process, given time to hang
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_as_system_prompt_is_a_finding_and_review_does_not_hang(
    policy_dir: Path,
) -> None:
    os.mkfifo(policy_dir / "prompts" / "pipe.md")
    text = (policy_dir / f"{TASK}.toml").read_text()
    (policy_dir / "piped.toml").write_text(
        text.replace('"prompts/offline_demo.md"', '"prompts/pipe.md"')
    )
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "policy", "review", str(policy_dir)],
        capture_output=True,
        text=True,
        timeout=60,  # it waited for a writer for ever
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert "not a regular file" in done.stdout + done.stderr, done.stdout + done.stderr
