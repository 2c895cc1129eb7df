"""metadata.user_id: a stable, non-reversible caller identifier, only where the policy asks."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import SecretStr

from audit import EventKind
from gateway import Gateway, Settings
from gateway.errors import PolicyLoadError
from gateway.keys import USER_ID_PREFIX, forwarded_user_id
from gateway.policy import plan_request
from tests.answer.conftest import SALT, WriteTask
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import MakeGateway, events

PROMPT = "Transaction: EUR 9,900 from Jane Roe to ACME Shipping Ltd."
FORWARD = "forward_user_id = true"


def test_the_identifier_is_an_hmac_of_the_caller_stable_and_not_the_name() -> None:
    salt = SecretStr(SALT)
    first = forwarded_user_id("payments-svc", salt=salt)
    assert first == forwarded_user_id("payments-svc", salt=salt)
    assert first is not None and first.startswith(USER_ID_PREFIX)
    mac = hmac.new(SALT.encode(), b"payments-svc", hashlib.sha256).hexdigest()[:32]
    assert first == USER_ID_PREFIX + mac
    assert "payments" not in first
    assert first != forwarded_user_id("risk-desk", salt=salt)
    assert first != forwarded_user_id("payments-svc", salt=SecretStr("another deployment"))
    assert forwarded_user_id("payments-svc", salt=None) is None
    assert forwarded_user_id(None, salt=salt) is None


def test_a_forwarding_policy_sends_the_identifier_never_the_name(
    write_task: WriteTask,
    salted_gateway: Callable[..., Gateway],
    fake_api: FakeMessagesAPI,
) -> None:
    write_task("monitored", caller=FORWARD)
    salted_gateway().complete("monitored", PROMPT, caller="payments-svc")
    (sent,) = fake_api.requests
    assert sent.json is not None
    assert sent.json["metadata"] == {
        "user_id": forwarded_user_id("payments-svc", salt=SecretStr(SALT))
    }
    assert b"payments-svc" not in sent.body


def test_a_policy_that_does_not_forward_sends_no_metadata(
    salted_gateway: Callable[..., Gateway], fake_api: FakeMessagesAPI
) -> None:
    salted_gateway().complete("compliance_review", PROMPT, caller="payments-svc")
    assert fake_api.requests[0].json is not None
    assert "metadata" not in fake_api.requests[0].json


def test_forwarding_without_a_salt_is_refused_recorded_and_nothing_sent(
    write_task: WriteTask, make_gateway: MakeGateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    write_task("monitored", caller=FORWARD)
    with pytest.raises(PolicyLoadError, match="GATEWAY_USER_ID_SALT"):
        make_gateway().complete("monitored", PROMPT, caller="payments-svc")
    assert fake_api.requests == []
    assert [e.kind for e in events(db_path)] == [EventKind.REJECTED]


def test_forwarding_is_part_of_the_fingerprint_only_when_set(
    write_task: WriteTask, salted_gateway: Callable[..., Gateway]
) -> None:
    write_task("monitored", caller=FORWARD)
    write_task("plain")
    policies = salted_gateway()._core.policies
    assert policies.get("monitored").content()["caller"]["forward_user_id"] is True
    assert "forward_user_id" not in policies.get("plain").content()["caller"]


def test_the_salt_is_a_secret_setting() -> None:
    settings = Settings.from_env({"GATEWAY_USER_ID_SALT": SALT})
    assert settings.user_id_salt is not None
    assert settings.user_id_salt.get_secret_value() == SALT
    assert SALT not in repr(settings)
    assert SALT not in settings.model_dump_json()


def test_a_template_of_a_forwarding_task_plans_without_an_identifier(
    write_task: WriteTask, salted_gateway: Callable[..., Gateway]
) -> None:
    write_task("monitored", caller=FORWARD)
    gateway = salted_gateway()
    policy = gateway._core.policies.get("monitored")
    model = gateway._core.catalog.get(policy.model.id)
    assert model is not None
    plan = plan_request(policy, model, [{"role": "user", "content": "..."}])  # policy show
    assert "metadata" not in plan.body
