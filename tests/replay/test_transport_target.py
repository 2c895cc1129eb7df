"""``gateway replay --model TRANSPORT:ID@REGION``: model-risk compares Anthropic's API against
a cloud for the same recorded requests. The target's syntax, its one-line refusals, a live
migration of a first-party request to Bedrock (the loopback fake), and a region the gateway
does not send to refused before anything is recorded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import Result

from audit import AuditStore
from gateway.catalog import Catalog
from gateway.errors import InputError
from gateway.policy import PolicySet, parse_model_target
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.bedrock import BedrockProvider
from gateway.providers.registry import Providers
from gateway.replay import Outcome, Replayer, ReplayReport, Selection
from gateway.settings import Settings
from tests.fakes.cloud_apis import FakeBedrock
from tests.replay.conftest import Recorded
from tests.replay.helpers import API_KEY, head, replay_events

REGION = "eu-central-1"
TARGET = f"bedrock:eu.anthropic.claude-sonnet-4-6@{REGION}"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load()


@pytest.mark.parametrize(
    ("text", "transport", "transport_id", "region", "label"),
    [
        ("claude-sonnet-4-6", None, None, None, "claude-sonnet-4-6"),
        ("anthropic:claude-sonnet-4-6", None, None, None, "claude-sonnet-4-6"),
        (TARGET, "bedrock", "eu.anthropic.claude-sonnet-4-6", REGION, TARGET),
        (  # the first-party id on a cloud: the transport's base id
            "bedrock:claude-sonnet-4-6@us-east-1",
            "bedrock",
            None,
            "us-east-1",
            "bedrock:anthropic.claude-sonnet-4-6@us-east-1",
        ),
        (
            "vertex:claude-sonnet-4-6@europe-west1",
            "vertex",
            None,
            "europe-west1",
            "vertex:claude-sonnet-4-6@europe-west1",
        ),
    ],
)
def test_a_target_names_the_model_its_transport_and_region(
    catalog: Catalog,
    text: str,
    transport: str | None,
    transport_id: str | None,
    region: str | None,
    label: str,
) -> None:
    target = parse_model_target(text, catalog)
    assert target.model.id == "claude-sonnet-4-6"
    assert (target.transport, target.transport_id, target.region) == (
        transport,
        transport_id,
        region,
    )
    assert target.label == label


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("bedrock:eu.anthropic.claude-sonnet-4-6", "name the region"),
        ("claude-sonnet-4-6@eu-central-1", "cloud transport only"),
        ("azure:claude-sonnet-4-6@westeurope", "no transport is called 'azure'"),
        ("bedrock:eu.anthropic.claude-nope@eu-central-1", "lists no model"),
        ("vertex:anthropic.claude-opus-4-6-v1@europe-west1", "lists no model"),
        ("claude-nope", "not in the model catalog"),
        (":claude-sonnet-4-6", "not of the form"),
        ("bedrock:claude-sonnet-4-6@", "not of the form"),
    ],
)
def test_a_target_that_names_nothing_is_one_line(catalog: Catalog, text: str, why: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_model_target(text, catalog)
    assert why in caught.value.message and "\n" not in caught.value.message


def test_a_moved_policy_carries_the_transport_and_region(
    catalog: Catalog, recorded: Recorded
) -> None:
    policy = PolicySet.load(recorded.policy_dir, catalog).get("compliance_review")
    moved = parse_model_target(TARGET, catalog).policy(policy)
    assert (moved.model.transport, moved.model.region) == ("bedrock", REGION)
    assert moved.model.transport_id == "eu.anthropic.claude-sonnet-4-6"
    assert moved.fingerprint != policy.fingerprint
    back = parse_model_target("claude-sonnet-4-6", catalog).policy(moved)
    assert back.model.transport is None and back.model.region is None


def _replayer_run(
    recorded: Recorded, fake: FakeBedrock, *, region: str, target: str
) -> ReplayReport:
    providers = Providers(
        Settings(bedrock_region=region),
        overrides={
            "anthropic": lambda _s: AnthropicProvider(api_key=API_KEY, base_url=recorded.base_url),
            "bedrock": lambda s: BedrockProvider(region=s.bedrock_region, base_url=fake.base_url),
        },
    )
    try:
        with AuditStore.open(recorded.url, "os") as store:
            replayer = Replayer(store, Catalog.load(), providers)
            selection = Selection(request_ids=(recorded.ids["compliance"],))
            return replayer.run(replayer.prepare(selection, live=True, model=target))
    finally:
        providers.close()


@pytest.mark.usefixtures("aws_credentials")
def test_a_first_party_request_is_replayed_live_on_bedrock(recorded: Recorded) -> None:
    with FakeBedrock(region=REGION) as fake:
        report = _replayer_run(recorded, fake, region=REGION, target=TARGET)
        (sent,) = fake.requests
    row = report.requests[0]
    assert row.outcome in (Outcome.IDENTICAL, Outcome.DIFFERING)
    assert row.target_model == TARGET
    assert sent.path == "/model/eu.anthropic.claude-sonnet-4-6/invoke"
    assert sent.json["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in sent.json and sent.json["temperature"] == 0.0  # the policy's mandate
    (event,) = replay_events(recorded.url)
    assert event.data["target_model"] == TARGET


@pytest.mark.usefixtures("aws_credentials")
def test_a_region_the_gateway_does_not_send_to_is_refused_before_recording(
    recorded: Recorded,
) -> None:
    before = head(recorded.url)
    with FakeBedrock(region="us-east-1") as fake:
        with pytest.raises(InputError, match="sends bedrock requests to us-east-1"):
            _replayer_run(recorded, fake, region="us-east-1", target=TARGET)
        assert fake.requests == []
    assert head(recorded.url) == before


def test_the_cli_refuses_a_malformed_target_in_one_line(cli: Callable[..., Result]) -> None:
    result = cli("--task", "compliance_review", "--model", "bedrock:nope")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0].startswith("error: --model 'bedrock:nope'"), result.output
    assert "Traceback" not in result.output
