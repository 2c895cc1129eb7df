"""How a Messages body and its anthropic-beta header become the gateway's overrides."""

from __future__ import annotations

import pytest

from gateway.catalog import Catalog
from gateway.policy import PolicySet
from gateway.server._errors import ApiError
from gateway.server._wire import parse_messages
from tests.policy.conftest import SHIPPED, TODAY

PROMPT = [{"role": "user", "content": "Hello."}]


@pytest.fixture(scope="module")
def policies() -> PolicySet:
    return PolicySet.load(SHIPPED, Catalog.load(), today=TODAY)


def test_output_config_and_the_beta_header_map_to_overrides(policies: PolicySet) -> None:
    schema = {"type": "object"}
    body = {
        "model": "structured_extraction",
        "max_tokens": 100,
        "messages": PROMPT,
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": schema}},
    }
    call = parse_messages(
        body, header_task=None, policies=policies, betas=" a-2025-01-01, b-2025-02-02 "
    )
    assert call.overrides == {
        "max_tokens": 100,
        "effort": "high",
        "output_format": {"type": "json_schema", "schema": schema},
        "betas": ["a-2025-01-01", "b-2025-02-02"],
    }


@pytest.mark.parametrize(
    ("body", "header"),
    [
        ({"betas": ["a-2025-01-01"]}, None),
        ({}, " , "),
        ({}, ",".join(f"b{i}" for i in range(65))),
    ],
)
def test_betas_only_in_the_header_and_bounded(
    policies: PolicySet, body: dict[str, object], header: str | None
) -> None:
    full = {"model": "coding_agent", "max_tokens": 100, "messages": PROMPT, **body}
    with pytest.raises(ApiError) as refused:
        parse_messages(full, header_task=None, policies=policies, betas=header)
    assert refused.value.status == 400
