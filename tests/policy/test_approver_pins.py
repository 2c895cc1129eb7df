"""Approver key pinning: with GATEWAY_TRUSTED_APPROVERS_FILE (or GATEWAY_TRUSTED_APPROVERS), an
approval counts only when signed by its approver's pinned key. The attack: an insider who holds
an approver key of their own (or can write the log) approves under a colleague's name, so one
person makes "four eyes"."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventKind
from audit.store.signing import Signer
from gateway import Gateway, Settings
from gateway.cli import main
from gateway.errors import ConfigurationError, PolicyLoadError
from gateway.evidence import trusted_approvers
from tests.policy.conftest import VALID, WriteFolder

ALICE, BOB, MALLORY = (secrets.token_hex(32) for _ in range(3))


def _public(private: str) -> str:
    return Signer.from_text(private).public_key


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()  # created and migrated
    return url


@pytest.fixture
def folder(write_folder: WriteFolder) -> Path:
    return write_folder({"task_a.toml": VALID, "prompts/system.md": "Answer briefly."})


@pytest.fixture
def pins(tmp_path: Path) -> Path:
    path = tmp_path / "approvers.toml"
    path.write_text(
        f'# who may approve, and with which key\nalice = "{_public(ALICE)}"\n'
        f'bob = "{_public(BOB)}"\n',
        encoding="utf-8",
    )
    return path


def run(db: str, *args: str, **env: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": db, **env})


def _approve(db: str, folder: Path, name: str, key: str) -> None:
    result = run(db, "policy", "approve", "task_a", "--approver", name, "--policy-dir",
                 str(folder), GATEWAY_APPROVER_KEY=key)  # fmt: skip
    assert result.exit_code == 0, result.output


@pytest.fixture
def approved_by_alice_and_fake_bob(db: str, folder: Path) -> None:
    """Alice approves with her key; Mallory, holding an approver key of her own, approves
    under Bob's name."""
    _approve(db, folder, "alice", ALICE)
    _approve(db, folder, "bob", MALLORY)


def _settings(folder: Path, db: str, **changes: object) -> Settings:
    return Settings(
        policy_dir=folder, database_url=db, require_approvals=2, durability="os", **changes
    )


@pytest.mark.usefixtures("approved_by_alice_and_fake_bob")
def test_an_approval_under_another_approvers_name_does_not_count_when_keys_are_pinned(
    folder: Path, db: str, pins: Path
) -> None:
    with Gateway(_settings(folder, db, unsafe_unpinned_approvers=True), offline=True):
        pass  # unpinned: two names, two keys, "four eyes" - the attack works

    with (
        Gateway(_settings(folder, db, trusted_approvers_file=pins), offline=True) as gw,
        pytest.raises(PolicyLoadError) as refused,
    ):
        gw.complete("task_a", "The reviewer reads the")
    message = refused.value.message
    assert "task 'task_a'" in message and "has 1 of the 2" in message
    assert "approved by alice; 1 more needed" in message
    fake = Signer.from_text(MALLORY).key_id
    assert f"bob's approval is signed by key {fake}, not the key pinned for bob" in message
    assert Signer.from_text(BOB).key_id in message


@pytest.mark.usefixtures("approved_by_alice_and_fake_bob")
def test_review_show_and_the_signoff_sheet_count_only_pinned_keys(
    folder: Path, db: str, pins: Path, tmp_path: Path
) -> None:
    env = {"GATEWAY_REQUIRE_APPROVALS": "2", "GATEWAY_TRUSTED_APPROVERS_FILE": str(pins)}
    review = run(db, "policy", "review", str(folder), **env)
    assert review.exit_code == 1
    assert "1 of 2 (alice) MISSING" in review.output
    assert "task_a: not counted: seq 2: bob's approval is signed by key" in review.output
    assert "Approver keys: pinned" in review.output
    data = json.loads(run(db, "policy", "review", str(folder), "--format", "json", **env).output)
    (task,) = data["tasks"]
    assert task["approvals"]["approvers"] == ["alice"] and task["approvals"]["pinned"] is True
    assert "not the key pinned for bob" in task["approvals"]["not_counted"][0]

    show = run(db, "policy", "show", "task_a", "--policy-dir", str(folder), "--format", "json",
               **env)  # fmt: skip
    assert json.loads(show.output)["approvals"]["approvers"] == ["alice"]
    sheet = tmp_path / "sheet.html"
    made = run(db, "policy", "show", "task_a", "--policy-dir", str(folder), "--format", "html",
               "-o", str(sheet), **env)  # fmt: skip
    assert made.exit_code == 0, made.output
    html = sheet.read_text(encoding="utf-8")
    assert "not the key pinned for bob" in html and "Approver keys are pinned" in html

    unpinned = run(db, "policy", "review", str(folder), GATEWAY_REQUIRE_APPROVALS="2")
    assert unpinned.exit_code == 0 and "Approver keys: not pinned" in unpinned.output


def test_the_real_approvers_keys_are_enough(folder: Path, db: str, pins: Path) -> None:
    _approve(db, folder, "alice", ALICE)
    _approve(db, folder, "bob", BOB)
    _approve(db, folder, "carol", MALLORY)  # not pinned at all: not counted, said so
    with Gateway(_settings(folder, db, trusted_approvers_file=pins), offline=True) as gw:
        assert gw.complete("task_a", "The reviewer reads the").text is not None
    env = {"GATEWAY_TRUSTED_APPROVERS_FILE": str(pins)}
    data = json.loads(run(db, "policy", "review", str(folder), "--format", "json", **env).output)
    (task,) = data["tasks"]
    assert task["approvals"]["approvers"] == ["alice", "bob"]
    assert task["approvals"]["not_counted"] == ["seq 3: carol is not a pinned approver"]


def test_pins_from_json_and_from_the_environment(tmp_path: Path) -> None:
    as_json = tmp_path / "approvers.json"
    as_json.write_text(json.dumps({"alice": _public(ALICE)}), encoding="utf-8")
    assert trusted_approvers(Settings(trusted_approvers_file=as_json)) == {"alice": _public(ALICE)}
    env = Settings.from_env({"GATEWAY_TRUSTED_APPROVERS": f"alice={_public(ALICE)}, bob="
                             f"{_public(BOB)}"})  # fmt: skip
    assert trusted_approvers(env) == {"alice": _public(ALICE), "bob": _public(BOB)}
    assert trusted_approvers(Settings()) is None  # unset: unpinned


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('alice = "not-a-key"\n', "the key pinned for approver 'alice'"),
        ("alice = [1, 2]\n", "the key pinned for approver 'alice'"),
        ("alice = \n", "is not valid TOML"),
    ],
)
def test_an_unusable_pins_file_is_a_one_line_configuration_error(
    folder: Path, db: str, tmp_path: Path, content: str, said: str
) -> None:
    path = tmp_path / "approvers.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigurationError, match=said):
        trusted_approvers(Settings(trusted_approvers_file=path))
    review = run(db, "policy", "review", str(folder), GATEWAY_TRUSTED_APPROVERS_FILE=str(path))
    assert review.exit_code == 2 and "Traceback" not in review.output
    assert said in review.output


def test_a_name_pinned_to_two_keys_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "approvers.toml"
    path.write_text(f'alice = "{_public(ALICE)}"\n', encoding="utf-8")
    settings = Settings(trusted_approvers={"alice": _public(BOB)}, trusted_approvers_file=path)
    with pytest.raises(ConfigurationError, match="pinned to two different keys"):
        trusted_approvers(settings)


def test_an_approval_under_another_name_is_refused_before_it_is_said_approved(
    folder: Path, db: str, pins: Path
) -> None:
    """With keys pinned, Mallory approving as Bob is refused in one line, nothing printed as
    approved and nothing recorded (it was recorded, printed "approved ... as bob", then said
    not to count)."""
    args = ["policy", "approve", "task_a", "--approver", "bob", "--policy-dir", str(folder)]
    env = {"GATEWAY_TRUSTED_APPROVERS_FILE": str(pins), "GATEWAY_APPROVER_KEY": MALLORY}
    for fmt in ("text", "json"):
        result = run(db, *args, "--format", fmt, **env)
        assert result.exit_code == 2, result.output
        assert not any(line.startswith("approved") for line in result.output.splitlines())
        fake = Signer.from_text(MALLORY).key_id
        assert f"not approved 'task_a' as 'bob': the key {fake} is not the key pinned" in (
            result.output
        )
    with AuditStore.open(db) as store:
        assert list(store.iter_events(kind=EventKind.APPROVAL)) == []
    review = run(db, "policy", "review", str(folder), GATEWAY_TRUSTED_APPROVERS_FILE=str(pins))
    assert "not counted" not in review.output  # never listed, not even as not counted
    result = run(db, *args, GATEWAY_TRUSTED_APPROVERS_FILE=str(pins), GATEWAY_APPROVER_KEY=BOB)
    assert result.exit_code == 0, result.output
    assert "approved task_a" in result.output and "does not count" not in result.output


def test_an_approver_who_is_not_pinned_is_refused_and_nothing_is_written(
    folder: Path, db: str, pins: Path
) -> None:
    args = ["policy", "approve", "task_a", "--approver", "carol", "--policy-dir", str(folder)]
    env = {"GATEWAY_TRUSTED_APPROVERS_FILE": str(pins), "GATEWAY_APPROVER_KEY": MALLORY}
    for _ in range(2):
        result = run(db, *args, **env)
        assert result.exit_code == 2 and "'carol' is not a pinned approver" in result.output
    with AuditStore.open(db) as store:
        assert list(store.iter_events(kind=EventKind.APPROVAL)) == []


def test_approve_with_the_reviewed_fingerprint_refuses_another_version(
    folder: Path, db: str
) -> None:
    shown = run(db, "policy", "show", "task_a", "--policy-dir", str(folder), "--format", "json")
    reviewed = json.loads(shown.output)["fingerprint"]
    (folder / "prompts" / "system.md").write_text("Answer at length.")  # changed after review
    args = ["policy", "approve", "task_a", "--approver", "alice", "--policy-dir", str(folder)]
    refused = run(db, *args, "--fingerprint", reviewed, GATEWAY_APPROVER_KEY=ALICE)
    assert refused.exit_code == 2, refused.output
    assert f"not the reviewed {reviewed}; nothing was signed or recorded" in refused.output
    with AuditStore.open(db) as store:
        assert list(store.iter_events(kind=EventKind.APPROVAL)) == []
    current = json.loads(
        run(db, "policy", "show", "task_a", "--policy-dir", str(folder), "--format", "json").output
    )["fingerprint"]
    done = run(db, *args, "--fingerprint", current, GATEWAY_APPROVER_KEY=ALICE)
    assert done.exit_code == 0, done.output
    assert f"approved task_a {current} as alice" in done.output
