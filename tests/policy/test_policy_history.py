"""Policy versions as records: `policy history TASK` lists each version the log holds with
its dates, its approvals and the diff from the one before; `policy show --fingerprint`
prints a stored version; `audit show` names a request's version, its approvals and when it
was in force; a start that refuses unapproved tasks is one event, whatever the requests; an
approval under another approver's name is never listed as an approval; the sign-off sheet
dates each approval and shows what changed since the last approved version."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventKind
from audit.store.signing import Signer
from gateway import Gateway, PolicyNotApproved, Settings
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.evidence import approval_draft, sign_approval
from gateway.keys import record_signer
from gateway.policy import PolicySet
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import API_KEY
from tests.policy.conftest import VALID, WriteFolder

ALICE, BOB, MALLORY = (secrets.token_hex(32) for _ in range(3))


@dataclass
class Log:
    url: str
    folder: Path
    pins: Path
    v1: str  # fingerprints: v1 approved by alice and bob, v2 (the prompt edited) by nobody
    v2: str
    first_request: str
    second_request: str

    def run(self, *args: str, **env: str) -> Result:
        base = {
            "GATEWAY_DATABASE_URL": self.url,
            "GATEWAY_POLICY_DIR": str(self.folder),
            "GATEWAY_TRUSTED_APPROVERS_FILE": str(self.pins),
        }
        return CliRunner().invoke(main, list(args), env={**base, **env})


def _approve(log: Log, name: str, key: str) -> None:
    done = log.run("policy", "approve", "task_a", "--approver", name, GATEWAY_APPROVER_KEY=key)
    assert done.exit_code == 0, done.output


@pytest.fixture
def log(write_folder: WriteFolder, tmp_path: Path, fake_api: FakeMessagesAPI) -> Log:
    folder = write_folder({"task_a.toml": VALID, "prompts/system.md": "Answer briefly."})
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()
    pins = tmp_path / "approvers.toml"
    alice, bob = (Signer.from_text(k).public_key for k in (ALICE, BOB))
    pins.write_text(f'alice = "{alice}"\nbob = "{bob}"\n', encoding="utf-8")
    log = Log(url, folder, pins, "", "", "", "")
    _approve(log, "alice", ALICE)
    _approve(log, "bob", BOB)
    settings = Settings(
        policy_dir=folder,
        database_url=url,
        durability="os",
        require_approvals=2,
        trusted_approvers_file=pins,
        anthropic_api_key=API_KEY,
        anthropic_base_url=fake_api.base_url,
    )
    with Gateway(settings) as gw:
        log.first_request = gw.complete("task_a", "The reviewer reads", caller="d1").request_id
        log.v1 = gw.policies.get("task_a").fingerprint
    (folder / "prompts" / "system.md").write_text("Answer briefly. Say PASS when unsure.")
    with Gateway(settings) as gw:  # v2 is refused: no approvals
        with pytest.raises(PolicyNotApproved) as refused:
            gw.complete("task_a", "The reviewer reads", caller="d1")
        log.second_request = refused.value.request_id or ""
        log.v2 = refused.value.fingerprint
    return log


def _plant_approval(log: Log, key: str, name: str, fingerprint: str) -> None:
    """An APPROVAL event written by a gateway (so its record signature checks out) with a
    key that is not the one pinned for ``name``: what `policy approve` now refuses to write,
    as an older gateway or someone with the record key could have written it."""
    policies = PolicySet.load(log.folder, Catalog.load())
    policy = policies.get("task_a")
    approval = sign_approval(key, task="task_a", fingerprint=fingerprint, approver=name)
    signer = record_signer(Settings(database_url=log.url), create=True)
    with AuditStore.open(log.url, signer=signer) as store:
        store.append(approval_draft(approval, policy))


def test_history_lists_each_version_with_dates_approvals_and_the_diff(log: Log) -> None:
    out = log.run("policy", "history", "task_a", "--format", "json")
    assert out.exit_code == 0, out.output
    versions = json.loads(out.output)["versions"]
    assert [v["fingerprint"] for v in versions] == [log.v1, log.v2]
    first, second = versions
    assert [a["approver"] for a in first["approvals"]] == ["alice", "bob"]
    assert all(a["at"] for a in first["approvals"])
    assert first["requests"] == 1 and first["first_used"] and first["last_used"]
    assert second["approvals"] == [] and second["requests"] == 1  # the refused request
    assert first["diff_from_previous"] is None
    diff = second["diff_from_previous"]
    assert diff["from"] == log.v1
    assert [c["key"] for c in diff["changes"]] == ["system_prompt_digest"]
    assert any("Say PASS when unsure." in line for t in diff["text_diffs"] for line in t["diff"])
    text = log.run("policy", "history", "task_a").output
    assert "alice (" in text and "+Answer briefly. Say PASS when unsure." in text


def test_history_of_a_task_the_log_never_saw_is_one_line(log: Log) -> None:
    out = log.run("policy", "history", "no_such_task")
    assert out.exit_code == 2
    assert "names no version of task 'no_such_task'" in out.output
    assert "Traceback" not in out.output


def test_show_fingerprint_prints_the_stored_version_not_the_folder(log: Log) -> None:
    out = log.run("policy", "show", "--fingerprint", log.v1, "--format", "json")
    assert out.exit_code == 0, out.output
    stored = json.loads(out.output)
    assert stored["fingerprint"] == log.v1
    assert stored["content"]["system_prompt"] == "Answer briefly."  # the folder now says more
    text = log.run("policy", "show", "--fingerprint", log.v1).output
    assert f"stored version {log.v1} of task task_a" in text and "claude-sonnet-4-6" in text
    missing = log.run("policy", "show", "--fingerprint", "sha256:" + "0" * 64)
    assert missing.exit_code == 2 and "stores no policy version" in missing.output


def test_audit_show_names_the_version_its_approvals_and_when_it_was_in_force(log: Log) -> None:
    shown = json.loads(log.run("audit", "show", log.first_request, "--format", "json").output)
    version = shown["policy_version"]
    assert version["fingerprint"] == log.v1
    assert [a["approver"] for a in version["approvals"]] == ["alice", "bob"]
    assert version["first_used"] and version["last_used"]
    text = log.run("audit", "show", log.first_request).output
    assert "in use " in text and "approved by alice (" in text
    refused = log.run("audit", "show", log.second_request).output
    assert "approved by none" in refused


def test_audit_list_filters_by_fingerprint(log: Log) -> None:
    rows = json.loads(
        log.run("audit", "list", "--fingerprint", log.v1[:19], "--format", "json").output
    )
    # The version's approvals and its request, nothing else.
    assert {r["policy_fingerprint"] for r in rows} == {log.v1}
    assert [r["status"] for r in rows] == ["approval", "approval", "completed"]
    assert rows[-1]["request_id"] == log.first_request
    digits = log.v2.removeprefix("sha256:")[:12]  # as the table shows it
    rows = json.loads(log.run("audit", "list", "--fingerprint", digits, "--format", "json").output)
    assert [r["request_id"] for r in rows if r["status"] == "rejected"] == [log.second_request]
    assert {r["policy_fingerprint"] for r in rows} == {log.v2}
    bad = log.run("audit", "list", "--fingerprint", "not-hex")
    assert bad.exit_code == 2 and "is not a policy fingerprint" in bad.output


def test_each_start_refusing_tasks_is_one_event_naming_them(log: Log) -> None:
    with AuditStore.open(log.url) as store:
        starts = list(store.iter_events(kind=EventKind.UNAPPROVED_TASKS))
    assert len(starts) == 1  # the second start, however many requests it refused
    (refused,) = starts[0].data["tasks"]
    assert refused["task"] == "task_a" and refused["fingerprint"] == log.v2
    assert refused["approvers"] == [] and starts[0].data["required"] == 2
    listed = json.loads(log.run("audit", "list", "--kind", "unapproved_tasks",
                                "--format", "json").output)  # fmt: skip
    assert [r["status"] for r in listed] == ["unapproved tasks"]
    verified = log.run("audit", "verify")
    assert verified.exit_code == 0, verified.output  # the new kind verifies like any event


def test_an_approval_under_another_name_is_never_listed_as_an_approval(log: Log) -> None:
    _plant_approval(log, MALLORY, "alice", log.v2)  # mallory's key under alice's name
    versions = json.loads(log.run("policy", "history", "task_a", "--format", "json").output)
    second = versions["versions"][1]
    assert second["approvals"] == []
    assert (
        len(second["not_counted"]) == 1
        and "not the key pinned for alice" in (second["not_counted"][0])
    )
    text = log.run("policy", "history", "task_a").output
    row = next(line for line in text.splitlines() if line.startswith(log.v2))
    assert row.rstrip().endswith("none")
    assert "not counted" in text
    shown = json.loads(log.run("audit", "show", log.second_request, "--format", "json").output)
    assert shown["policy_version"]["approvals"] == []


def test_the_signoff_sheet_dates_approvals_and_shows_changes_since_the_approved_version(
    log: Log, tmp_path: Path
) -> None:
    sheet = tmp_path / "sheet.html"
    out = log.run("policy", "show", "task_a", "--format", "html", "-o", str(sheet),
                  GATEWAY_REQUIRE_APPROVALS="2")  # fmt: skip
    assert out.exit_code == 0, out.output
    html = sheet.read_text(encoding="utf-8")
    assert "Changes since the last approved version" in html
    assert f"The last approved version was <code>{log.v1}</code>" in html
    assert "system_prompt_digest" in html and "+Answer briefly. Say PASS when unsure." in html
    # Approve v2: the sheet dates each approval of it.
    _approve(log, "alice", ALICE)
    log.run("policy", "show", "task_a", "--format", "html", "-o", str(sheet))
    html = sheet.read_text(encoding="utf-8")
    assert "<th>approved (UTC)</th>" in html
    row = html.split("<td>alice</td>", 1)[1].split("</tr>", 1)[0]
    assert row.startswith("<td>20")  # a date, not "-"
