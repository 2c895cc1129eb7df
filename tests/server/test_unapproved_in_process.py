"""With GATEWAY_REQUIRE_APPROVALS, the server starts when one task and the routing table lack
their approvals: that task is a 403 naming it, its fingerprint and the approvals it lacks
(recorded REJECTED), a real model id the unapproved table would route is a 403 naming the
table, and the approved tasks answer (the official SDK against the in-process server)."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator

import anthropic
import pytest
from click.testing import CliRunner

from audit import AuditStore, EventKind
from gateway.callers import CallerKeys
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.policy import PolicySet
from gateway.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import SHIPPED, UPSTREAM_KEY
from tests.server.test_in_process import InProcessServer

PROMPT = [{"role": "user", "content": "Transaction: 9 EUR to ACME, approvals"}]
UNAPPROVED = ("compliance_review", "routes")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI) -> Settings:
    home = tmp_path_factory.mktemp("unapproved")
    shutil.copytree(SHIPPED, home / "policies")
    db = f"sqlite:///{home / 'audit.db'}"
    AuditStore.open(db).close()
    env = {"GATEWAY_DATABASE_URL": db, "GATEWAY_APPROVER_KEY": secrets.token_hex(32)}
    for task in sorted(p.stem for p in (home / "policies").glob("*.toml")):
        if task in UNAPPROVED:
            continue
        args = ["policy", "approve", task, "--approver", "alice", "--policy-dir"]
        done = CliRunner().invoke(main, [*args, str(home / "policies")], env=env)
        assert done.exit_code == 0, done.output
    return Settings(
        policy_dir=home / "policies",
        database_url=db,
        durability="os",
        anthropic_api_key=UPSTREAM_KEY,
        anthropic_base_url=fake.base_url,
        require_approvals=1,
        unsafe_unpinned_approvers=True,  # the count is this test's subject, not the pins
    )


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[anthropic.Anthropic]:
    with CallerKeys.open(settings) as keys:
        key = keys.create("payments-svc").key
    with InProcessServer(settings) as running:
        yield anthropic.Anthropic(base_url=running.base_url, api_key=key, max_retries=0)


def test_the_unapproved_task_is_refused_and_the_others_answer(
    settings: Settings, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    with pytest.raises(anthropic.PermissionDeniedError) as refused:
        client.messages.create(model="compliance_review", max_tokens=64, messages=PROMPT)
    message = str(refused.value)
    assert "task 'compliance_review' is refused: its version sha256:" in message
    assert "has 0 of the 1 approvals" in message
    with AuditStore.open(settings.database_url, "os", create=False) as store:
        rejected = list(store.iter_events(kind=EventKind.REJECTED))
    assert [(e.task, e.caller) for e in rejected] == [("compliance_review", "payments-svc")]

    fake.script(Reply.ok(text="Ideas."))
    answered = client.messages.create(model="quant_strategy", max_tokens=64, messages=PROMPT)
    assert answered.content[0].text == "Ideas."  # type: ignore[union-attr]


def test_the_unapproved_routing_table_routes_nothing(
    settings: Settings, client: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.PermissionDeniedError) as refused:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=PROMPT)
    assert "the routing table (routes.toml) is refused" in str(refused.value)
    # Its record names the table's version, and the log holds it, as a refused task's does.
    table = PolicySet.load(settings.policy_dir, Catalog.load()).routes
    assert table is not None
    with AuditStore.open(settings.database_url, "os", create=False) as store:
        rejected = list(store.iter_events(kind=EventKind.REJECTED))[-1]
        stored = store.policy_content(table.fingerprint)
    assert (rejected.task, rejected.caller) == ("routes", "payments-svc")
    assert rejected.data["error"] == "PolicyNotApproved"
    assert rejected.policy_fingerprint == table.fingerprint
    assert table.fingerprint in rejected.data["reason"]
    assert stored == table.content()
