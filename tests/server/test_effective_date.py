"""A task whose policy has not taken effect yet is refused by `gateway serve` as the API
refuses a bad request (400 invalid_request_error, the SDK's BadRequestError), naming the date;
the refusal is recorded and nothing goes upstream."""

from __future__ import annotations

import shutil
from pathlib import Path

import anthropic
import pytest

from audit import EventKind
from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import SHIPPED, running_server

pytestmark = pytest.mark.slow  # `gateway serve` as a process


def test_a_task_not_yet_in_effect_is_a_400_naming_its_date(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(SHIPPED, policies)
    policy = policies / "compliance_review.toml"
    text = policy.read_text(encoding="utf-8")
    policy.write_text(
        text.replace("\nowner = ", "\neffective_date = 2999-12-31\nowner = ", 1), encoding="utf-8"
    )
    with FakeMessagesAPI() as fake, running_server(tmp_path, fake) as server:
        client = anthropic.Anthropic(
            base_url=server.base_url, api_key=server.create_key("treasury-svc"), max_retries=0
        )
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(
                model="compliance_review",
                max_tokens=512,
                messages=[{"role": "user", "content": "Transaction: 10 CHF to Umbrella"}],
            )
        assert "takes effect on 2999-12-31" in str(refused.value)
        assert fake.requests == []
        rejected = [e for e in server.audit_events() if e.kind == EventKind.REJECTED]
        assert [e.data["key"] for e in rejected] == ["effective_date"]
