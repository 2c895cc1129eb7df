"""Policy sign-off: risk tier, effective date and regulations in the policy (fingerprinted only
when set), approvals signed by approvers' keys and recorded in the audit log, and a gateway that
requires N approvals of a task's exact fingerprint."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore
from audit.store.signing import Signer, signature_check
from gateway import Gateway, Settings
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.errors import PolicyLoadError
from gateway.evidence import approval_draft, approval_status, check_approvals, sign_approval
from gateway.keys import record_signer, trusted_record_keys
from gateway.policy import PolicySet
from tests.policy.conftest import SHIPPED, TODAY, VALID, WriteFolder

SIGNOFF = """\
risk_tier = "high"
effective_date = 2027-01-01
regulations = ["MiFID II Art. 16", "SR 11-7"]
"""


def _with_signoff(text: str = VALID) -> str:
    head, rest = text.split("reproducible", 1)
    return head + SIGNOFF + "reproducible" + rest


def _folder(write_folder: WriteFolder, policy: str = VALID) -> Path:
    return write_folder({"task_a.toml": policy, "prompts/system.md": "Answer briefly."})


def _load(folder: Path, catalog: Catalog) -> PolicySet:
    return PolicySet.load(folder, catalog, today=TODAY)


def test_signoff_fields_load_and_are_fingerprinted_only_when_set(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    plain = _load(_folder(write_folder), catalog).get("task_a")
    signed = _load(_folder(write_folder, _with_signoff()), catalog).get("task_a")
    assert signed.risk_tier == "high"
    assert signed.effective_date is not None and signed.effective_date.isoformat() == "2027-01-01"
    assert signed.regulations == ("MiFID II Art. 16", "SR 11-7")
    # Unset: not in the content at all, so every fingerprint recorded before them stands.
    assert not {"risk_tier", "effective_date", "regulations"} & set(plain.content())
    assert signed.fingerprint != plain.fingerprint
    again = type(signed).from_content(json.loads(json.dumps(signed.content())))
    assert again.fingerprint == signed.fingerprint


def test_a_risk_tier_that_is_not_one_of_the_words_does_not_load(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    folder = _folder(write_folder, _with_signoff().replace('"high"', '"severe"'))
    entry = _load(folder, catalog).entry("task_a")
    assert entry is not None and entry.policy is None
    assert any(f.rule == "invalid-value" and "risk_tier" in f.key for f in entry.findings)


def test_review_and_show_print_the_signoff(write_folder: WriteFolder, tmp_path: Path) -> None:
    folder = _folder(write_folder, _with_signoff())
    env = {"GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"}
    review = CliRunner().invoke(main, ["policy", "review", str(folder)], env=env)
    assert review.exit_code == 0, review.output
    signoff = review.output.split("Sign-off:")[1]
    row = next(line for line in signoff.splitlines() if line.startswith("task_a"))
    assert "high" in review.output and "2027-01-01" in row and "MiFID II Art. 16; SR 11-7" in row
    show = CliRunner().invoke(
        main, ["policy", "show", "task_a", "--policy-dir", str(folder), "--format", "json"], env=env
    )
    data = json.loads(show.output)
    assert data["risk_tier"] == "high" and data["effective_date"] == "2027-01-01"
    assert data["regulations"] == ["MiFID II Art. 16", "SR 11-7"]


# --- approvals -------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()  # created and migrated
    return url


def _approve(store: AuditStore, policies: PolicySet, approver: str, key: str) -> None:
    policy = policies.get("task_a")
    approval = sign_approval(key, task="task_a", fingerprint=policy.fingerprint, approver=approver)
    store.append(approval_draft(approval, policy))


def test_check_approvals_needs_n_distinct_approvers_of_the_exact_fingerprint(
    write_folder: WriteFolder, catalog: Catalog, db: str
) -> None:
    policies = _load(_folder(write_folder), catalog)
    alice, bob = secrets.token_hex(32), secrets.token_hex(32)
    signer = record_signer(Settings(database_url=db), create=True)
    check = signature_check(trusted_record_keys(Settings(database_url=db), signer))
    with AuditStore.open(db, signer=signer) as store:
        check_approvals(store, policies, 0)  # nothing required
        with pytest.raises(PolicyLoadError, match="approved by nobody"):
            check_approvals(store, policies, 2, signature=check)
        _approve(store, policies, "alice", alice)
        _approve(store, policies, "alice", alice)  # the same approver counts once
        _approve(store, policies, "mallory", alice)  # and so does the same key
        with pytest.raises(PolicyLoadError, match=r"task_a .* has 1 of 2: approved by alice"):
            check_approvals(store, policies, 2, signature=check)
        _approve(store, policies, "bob", bob)
        check_approvals(store, policies, 2, signature=check)
        with pytest.raises(PolicyLoadError, match="has 2 of 3"):
            check_approvals(store, policies, 3, signature=check)
        # Pinned approvers: only their own keys count.
        pins = {"alice": Signer.from_text(alice).public_key}
        with pytest.raises(PolicyLoadError, match="has 1 of 2"):
            check_approvals(store, policies, 2, trusted_approvers=pins, signature=check)


def test_a_changed_policy_needs_new_approvals(
    write_folder: WriteFolder, catalog: Catalog, db: str
) -> None:
    before = _load(_folder(write_folder), catalog)
    after = _load(_folder(write_folder, VALID.replace("1024", "1000")), catalog)
    with AuditStore.open(db, signer=Signer.generate()) as store:
        _approve(store, before, "alice", secrets.token_hex(32))
        _approve(store, before, "bob", secrets.token_hex(32))
        check_approvals(store, before, 2)
        with pytest.raises(PolicyLoadError, match="approved by nobody"):
            check_approvals(store, after, 1)


def test_an_approval_written_without_the_record_key_does_not_count(
    write_folder: WriteFolder, catalog: Catalog, db: str
) -> None:
    policies = _load(_folder(write_folder), catalog)
    trusted = record_signer(Settings(database_url=db), create=True)
    check = signature_check(trusted_record_keys(Settings(database_url=db), trusted))
    with AuditStore.open(db, signer=Signer.generate()) as forged:  # a database writer's own key
        _approve(forged, policies, "alice", secrets.token_hex(32))
    with AuditStore.open(db, signer=trusted) as store:
        status = approval_status(store, policies, signature=check)["task_a"]
        assert status.approvers == () and "not a trusted key" in status.rejected[0]
        with pytest.raises(PolicyLoadError):
            check_approvals(store, policies, 1, signature=check)


def test_an_approval_whose_signature_does_not_match_does_not_count(
    write_folder: WriteFolder, catalog: Catalog, db: str
) -> None:
    policies = _load(_folder(write_folder), catalog)
    policy = policies.get("task_a")
    real = sign_approval(secrets.token_hex(32), task="task_a", fingerprint=policy.fingerprint,
                         approver="alice")  # fmt: skip
    draft = approval_draft(real, policy)
    forged = draft.model_copy(update={"caller": "bob", "data": {**draft.data, "approver": "bob"}})
    with AuditStore.open(db, signer=Signer.generate()) as store:
        store.append(forged)
        status = approval_status(store, policies)["task_a"]
    assert status.approvers == () and "does not check out" in status.rejected[0]


def run(db: str, *args: str, **env: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": db, **env})


def test_approve_records_an_approval_event_and_review_shows_status(
    write_folder: WriteFolder, db: str
) -> None:
    folder = _folder(write_folder)
    review = run(db, "policy", "review", str(folder), GATEWAY_REQUIRE_APPROVALS="2")
    assert review.exit_code == 1 and "0 of 2 MISSING" in review.output
    for name in ("alice", "bob"):
        key = secrets.token_hex(32)
        result = run(db, "policy", "approve", "task_a", "--approver", name, "--policy-dir",
                     str(folder), GATEWAY_APPROVER_KEY=key)  # fmt: skip
        assert result.exit_code == 0, result.output
    review = run(db, "policy", "review", str(folder), "--format", "json",
                 GATEWAY_REQUIRE_APPROVALS="2")  # fmt: skip
    assert review.exit_code == 0, review.output
    [task] = json.loads(review.output)["tasks"]
    assert task["approvals"]["approvers"] == ["alice", "bob"] and task["approvals"]["enough"]
    events = json.loads(run(db, "audit", "list", "--format", "json").output)
    assert [e["status"] for e in events] == ["approval", "approval"]
    assert run(db, "audit", "verify").exit_code == 0


def test_approve_without_a_key_is_a_configuration_error(write_folder: WriteFolder, db: str) -> None:
    result = run(db, "policy", "approve", "task_a", "--approver", "alice", "--policy-dir",
                 str(_folder(write_folder)))  # fmt: skip
    assert result.exit_code == 2 and "GATEWAY_APPROVER_KEY" in result.output


def test_the_shipped_policies_keep_their_fingerprints_without_signoff(catalog: Catalog) -> None:
    for task in ("compliance_review", "risk_report"):
        policy = PolicySet.load(SHIPPED, catalog, today=TODAY).get(task)
        assert "risk_tier" not in policy.content()


def test_the_gateway_refuses_the_task_until_it_has_its_approvals(
    write_folder: WriteFolder, db: str
) -> None:
    folder = _folder(write_folder)
    settings = Settings(
        policy_dir=folder,
        database_url=db,
        require_approvals=1,
        durability="os",
        unsafe_unpinned_approvers=True,  # any key counts: this test is about the count
    )
    with Gateway(settings, offline=True) as refusing:  # starts; the task alone is refused
        assert refusing.policies.withheld() == ["task_a"]
        with pytest.raises(PolicyLoadError, match="approved by nobody"):
            refusing.complete("task_a", "The reviewer reads the")
    approved = run(db, "policy", "approve", "task_a", "--approver", "alice", "--policy-dir",
                   str(folder), GATEWAY_APPROVER_KEY=secrets.token_hex(32))  # fmt: skip
    assert approved.exit_code == 0, approved.output
    with Gateway(settings, offline=True) as gw:  # the exact fingerprint now has one approval
        assert gw.complete("task_a", "The reviewer reads the").text is not None
