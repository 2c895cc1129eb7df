"""The shipped tool task and PDF task: what they send and what they accept."""

from __future__ import annotations

import base64

import pytest

from gateway.catalog import Catalog
from gateway.errors import PolicyViolation
from gateway.policy import PolicySet, plan_request
from tests.policy.conftest import SHIPPED, TODAY
from tests.tools.conftest import model_of

PDF = base64.b64encode(b"%PDF-1.7\n%%EOF\n").decode()


@pytest.fixture(scope="module")
def shipped(catalog: Catalog) -> PolicySet:
    return PolicySet.load(SHIPPED, catalog, today=TODAY)


def test_sanctions_screening_sends_its_lookup_tool_with_the_cached_prompt(
    shipped: PolicySet, catalog: Catalog
) -> None:
    policy = shipped.get("sanctions_screening")
    body = plan_request(policy, model_of(catalog, policy), [{"role": "user", "content": "x"}]).body
    assert [t["name"] for t in body["tools"]] == ["lookup_entity"]
    assert body["tools"][0]["strict"] is True
    assert body["tool_choice"] == {"type": "auto"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert (policy.reproducible, policy.cache.mode) == (True, "replay")


def test_prospectus_summary_takes_one_pdf_and_nothing_else(
    shipped: PolicySet, catalog: Catalog
) -> None:
    policy = shipped.get("prospectus_summary")
    model = model_of(catalog, policy)
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
    }
    ask = {"type": "text", "text": "Summarise this prospectus."}
    plan = plan_request(policy, model, [{"role": "user", "content": [pdf, ask]}])
    assert plan.body["messages"][0]["content"][0] == pdf
    with pytest.raises(PolicyViolation) as caught:
        plan_request(policy, model, [{"role": "user", "content": [pdf, pdf, ask]}])
    assert caught.value.key == "input.documents.max_count"
    png = {**pdf, "type": "image"}
    with pytest.raises(PolicyViolation) as caught:
        plan_request(policy, model, [{"role": "user", "content": [png, ask]}])
    assert caught.value.key == "input.images"
