"""A request that forwarded metadata.user_id re-plans with the recorded value."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from gateway import Gateway, Settings
from gateway.keys import forwarded_user_id
from gateway.replay import Outcome
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY
from tests.replay.helpers import replay

SALT = "per-deployment-secret-5f1c2a9e"
CALLER = "payments-svc"


def _forwarding(policy_dir: Path) -> str:
    """compliance_review with ``[caller] forward_user_id = true``, as a task of its own."""
    text = (policy_dir / "compliance_review.toml").read_text(encoding="utf-8")
    assert text.count("[caller]\n") == 1
    (policy_dir / "monitored_review.toml").write_text(
        text.replace("[caller]\n", "[caller]\nforward_user_id = true\n"), encoding="utf-8"
    )
    return "monitored_review"


def _record(policy_dir: Path, url: str, fake_api: FakeMessagesAPI) -> str:
    task = _forwarding(policy_dir)
    fake_api.script(Reply.ok(text="Verdict: compliant."))
    settings = Settings(
        policy_dir=policy_dir,
        database_url=url,
        anthropic_api_key=API_KEY,
        anthropic_base_url=fake_api.base_url,
        durability="os",
        user_id_salt=SALT,
    )
    with Gateway(settings) as gw:
        request_id = gw.complete(task, "Pay 10 EUR to ACME.", caller=CALLER).request_id
    sent = fake_api.requests[-1].json
    assert sent is not None
    assert sent["metadata"] == {"user_id": forwarded_user_id(CALLER, salt=SecretStr(SALT))}
    return request_id


def test_verify_passes_for_a_request_that_forwarded_a_user_id(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    request_id = _record(policy_dir, sqlite_url, fake_api)
    # The replaying process has no salt: the identifier comes from the record.
    (row,) = replay(sqlite_url, request_id).requests
    assert row.outcome is Outcome.PASSED, row.reason
    assert {c.name for c in row.checks} >= {"request_hash", "wire_body"}


def test_a_migration_keeps_the_recorded_user_id(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    request_id = _record(policy_dir, sqlite_url, fake_api)
    (row,) = replay(sqlite_url, request_id, model="claude-opus-4-6").requests
    assert row.outcome is not Outcome.REFUSED, row.reason
    assert all(not c.path.startswith("$.metadata") for c in row.request_changes)
