"""Offline mode runs the full path (plan, audit, cache) on the local model, honestly labelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStore
from gateway import PolicyLoadError
from gateway.policy import Policy
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import MakeGateway, events


@pytest.mark.parametrize("task", ["compliance_review", "quant_strategy", "risk_report"])
def test_each_text_task_runs_offline_and_records_the_derived_policy(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI, db_path: Path, task: str
) -> None:
    gw = make_gateway(offline=True, anthropic_api_key=None)
    result = gw.complete(task, "The payment is")
    assert result.model == "local:ngram"
    assert fake_api.requests == []
    request = next(e for e in events(db_path) if e.request_id == result.request_id)
    assert request.data["provider"] == "local"
    assert request.data["model_version"].startswith("sha256:")
    reviewed = gw._core.policies.get(task)
    assert result.policy_fingerprint != reviewed.fingerprint  # never passes for the Claude one
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        recorded = store.policy_content(result.policy_fingerprint)
    assert recorded is not None
    assert Policy.from_content(recorded).model.id == "local:ngram"


def test_replay_works_offline(make_gateway: MakeGateway) -> None:
    gw = make_gateway(offline=True, anthropic_api_key=None)
    first = gw.complete("compliance_review", "Transaction: 7", overrides={"max_tokens": 256})
    second = gw.complete("compliance_review", "Transaction: 7", overrides={"max_tokens": 256})
    assert second.cached and second.text == first.text


def test_a_json_task_is_refused_offline_with_the_reason(make_gateway: MakeGateway) -> None:
    gw = make_gateway(offline=True, anthropic_api_key=None)
    with pytest.raises(PolicyLoadError) as caught:
        gw.complete("json_extraction", "Confirm: ACME")
    assert "structured" in str(caught.value).lower() or "json" in str(caught.value).lower()
