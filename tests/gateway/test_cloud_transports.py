"""A task whose policy names a cloud transport goes there, and every guarantee holds: the
request is recorded before it is sent (the recorded bytes are what the endpoint received), the
answer's model is checked against the transport's id, a repeat is replayed from the log without
reaching the cloud, and the log verifies. A policy whose transport cannot honour a mandate does
not load, with the review's explanation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore
from audit.verify import verify_log
from gateway import PolicyError, UpstreamError
from gateway.catalog import Catalog
from gateway.policy import PolicySet, plan_request, transported
from tests.fakes.cloud_apis import (
    VERSIONS,
    CloudReply,
    FakeBedrock,
    FakeVertex,
    ReceivedRequest,
)
from tests.fakes.cloud_auth import GOOGLE_TOKEN, vertex_with_token
from tests.gateway.cloud_policies import summary_policy
from tests.gateway.conftest import MakeGateway, events

pytestmark = pytest.mark.usefixtures("aws_credentials")  # botocore finds the static test key

REGION = "eu-central-1"
MODEL_IDS = {"bedrock": "eu.anthropic.claude-sonnet-4-6", "vertex": "claude-sonnet-4-6"}
PROMPT = "Summarise the exposure of counterparty 4711."

BEDROCK_POLICY = summary_policy("bedrock")
VERTEX_POLICY = summary_policy("vertex")


def _recorded_as_received(
    db_path: Path, request_id: str, sent: ReceivedRequest, transport: str, region: str
) -> None:
    """The write-ahead REQUEST names the transport, its model id and API version, and where
    the request went (the URL as sent, the region), and holds the exact body bytes the
    endpoint received (no credential or signature anywhere in it)."""
    received = sent.body
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        request = next(
            e for e in store.iter_events() if e.request_id == request_id and e.kind == "request"
        )
        assert store.payload(request.payload_digests["request_body"]) == received
    assert request.data["provider"] == transport
    assert request.data["model_id"] == MODEL_IDS[transport]
    # The version is the transport's, in the body, and the record says so.
    assert request.data["api_version"] == VERSIONS[transport]
    assert json.loads(received)["anthropic_version"] == VERSIONS[transport]
    # Where the body went: the URL as sent (the model id in it) and the region.
    target = request.data["target"]
    assert target["method"] == "POST" and target["url"].endswith(sent.path)
    assert f"/{MODEL_IDS[transport]}" in target["url"] and target["region"] == region
    recorded = json.dumps(request.data)
    for secret in ("test-secret", GOOGLE_TOKEN, "AWS4-HMAC-SHA256", "AKIDTESTFAKE0000"):
        assert secret not in recorded
    assert b"test-secret" not in received and GOOGLE_TOKEN.encode() not in received


def _verify(db_path: Path) -> None:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        report = verify_log(store)
    assert report.ok, report


def test_a_bedrock_task_is_recorded_replayed_and_verified(
    make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    (policy_dir / "cloud_summary.toml").write_text(BEDROCK_POLICY)
    with FakeBedrock(region=REGION) as fake:
        fake.script(CloudReply.throttled())  # Bedrock's ThrottlingException, then the answer
        gw = make_gateway(bedrock_region=REGION, bedrock_base_url=fake.base_url)
        first = gw.complete("cloud_summary", PROMPT)
        assert first.model == "eu.anthropic.claude-sonnet-4-6"
        assert [r.path for r in fake.requests] == [
            "/model/eu.anthropic.claude-sonnet-4-6/invoke"
        ] * 2
        kinds = [str(e.kind) for e in events(db_path) if e.request_id == first.request_id]
        assert kinds == ["request", "attempt_failed", "response"]
        _recorded_as_received(db_path, first.request_id, fake.requests[-1], "bedrock", REGION)
        again = gw.complete("cloud_summary", PROMPT)
        assert again.cached and again.text == first.text and len(fake.requests) == 2
    _verify(db_path)


def test_a_vertex_task_is_recorded_replayed_and_verified(
    make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    (policy_dir / "cloud_summary.toml").write_text(VERTEX_POLICY)
    with FakeVertex(token=GOOGLE_TOKEN) as fake:
        gw = make_gateway(
            vertex_project="bank-risk",
            vertex_region="europe-west1",
            vertex_base_url=f"{fake.base_url}/v1",
            providers={"vertex": vertex_with_token()},
        )
        first = gw.complete("cloud_summary", PROMPT)
        assert first.model == "claude-sonnet-4-6" and not first.cached
        assert fake.requests[0].path.endswith("/models/claude-sonnet-4-6:rawPredict")
        _recorded_as_received(db_path, first.request_id, fake.requests[0], "vertex", "europe-west1")
        again = gw.complete("cloud_summary", PROMPT)
        assert again.cached and len(fake.requests) == 1
    _verify(db_path)


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ('region = "eu-central-1"\ninference_geo = "us"', "transport-inference-geo"),
        (
            'region = "eu-central-1"\ntransport_id = "xx.anthropic.claude-sonnet-4-6"',
            "transport-id-unknown",
        ),
        ("", "transport-region-missing"),
    ],
)
def test_a_mandate_the_transport_cannot_honour_does_not_load(
    make_gateway: MakeGateway, policy_dir: Path, change: str, rule: str
) -> None:
    text = BEDROCK_POLICY.replace(
        f'transport_id = "eu.anthropic.claude-sonnet-4-6"\nregion = "{REGION}"', change
    )
    (policy_dir / "cloud_summary.toml").write_text(text)
    gw = make_gateway(bedrock_region=REGION)
    with pytest.raises(PolicyError) as caught:
        gw.complete("cloud_summary", PROMPT)
    assert rule in str(caught.value) or rule in repr(caught.value.__dict__)


def test_a_region_the_gateway_does_not_send_to_is_refused_before_sending(
    make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    (policy_dir / "cloud_summary.toml").write_text(BEDROCK_POLICY)
    with FakeBedrock(region="us-east-1") as fake:
        gw = make_gateway(bedrock_region="us-east-1", bedrock_base_url=fake.base_url)
        with pytest.raises(PolicyError, match="must run in region 'eu-central-1'"):
            gw.complete("cloud_summary", PROMPT)
        assert fake.requests == []
    _verify(db_path)


def test_the_request_key_holds_the_transport_and_region(
    policy_dir: Path,
) -> None:
    """The same prompt to the same model keys differently on each transport and region, so
    an answer recorded on one is never replayed as another's."""
    (policy_dir / "cloud_summary.toml").write_text(BEDROCK_POLICY)
    (policy_dir / "cloud_summary_paris.toml").write_text(
        BEDROCK_POLICY.replace(REGION, "eu-west-3")
    )
    (policy_dir / "cloud_summary_vertex.toml").write_text(VERTEX_POLICY)
    catalog = Catalog.load()
    policies = PolicySet.load(policy_dir, catalog)
    messages = [{"role": "user", "content": PROMPT}]
    hashes = set()
    for task in ("cloud_summary", "cloud_summary_paris", "cloud_summary_vertex"):
        policy = policies.get(task)
        sonnet = catalog.get("claude-sonnet-4-6")
        assert sonnet is not None
        model = transported(sonnet, policy, lambda _, p=policy: p.model.region)
        hashes.add(plan_request(policy, model, messages).request_hash)
    assert len(hashes) == 3


@pytest.mark.parametrize("fails", [False, True], ids=["whole", "breaks-off"])
def test_a_bedrock_stream_ends_in_a_terminal_record(
    make_gateway: MakeGateway, policy_dir: Path, db_path: Path, fails: bool
) -> None:
    """Streamed over Bedrock (AWS event-stream framing): the whole answer is a RESPONSE; one that
    breaks off mid-stream is a FAILED; either way the log verifies."""
    (policy_dir / "cloud_summary.toml").write_text(BEDROCK_POLICY)
    with FakeBedrock(region=REGION) as fake:
        if fails:
            fake.script(CloudReply.fails_mid_stream())
        gw = make_gateway(bedrock_region=REGION, bedrock_base_url=fake.base_url)
        seen: list[Any] = []
        try:
            with gw.stream("cloud_summary", PROMPT) as stream:
                seen.extend(stream)
            assert not fails and stream.result.text == "The fake cloud model answers."
        except UpstreamError:
            assert fails and seen
        assert fake.requests[0].path.endswith("/invoke-with-response-stream")
    kinds = [str(e.kind) for e in events(db_path)]
    assert kinds[0] == "request" and kinds[-1] == ("failed" if fails else "response")
    _verify(db_path)


FIRST_PARTY_POLICY = "".join(
    line
    for line in BEDROCK_POLICY.splitlines(keepends=True)
    if not line.startswith(("transport", "region"))
)


@pytest.mark.parametrize(
    ("cloud", "first"),
    [
        ("bedrock", "anthropic"),
        ("bedrock", "cloud"),
        # Vertex names the model exactly as the first-party API does: only the key's
        # transport and region keep the two apart.
        ("vertex", "anthropic"),
        ("vertex", "cloud"),
    ],
)
def test_an_answer_recorded_on_one_transport_never_serves_another(
    make_gateway: MakeGateway,
    policy_dir: Path,
    db_path: Path,
    fake_api: Any,
    cloud: str,
    first: str,
) -> None:
    """The same task and prompt moved between Anthropic's API and a cloud: the second
    transport is called, not served the first one's recorded answer; each transport's own
    repeat is served from its own record."""
    cloud_policy = BEDROCK_POLICY if cloud == "bedrock" else VERTEX_POLICY
    policies = {"anthropic": FIRST_PARTY_POLICY, "cloud": cloud_policy}
    second = "cloud" if first == "anthropic" else "anthropic"
    fake_cloud = (
        FakeBedrock(region=REGION) if cloud == "bedrock" else FakeVertex(token=GOOGLE_TOKEN)
    )
    with fake_cloud as fake:
        if cloud == "bedrock":
            settings: dict[str, Any] = {"bedrock_region": REGION, "bedrock_base_url": fake.base_url}
        else:
            settings = {
                "vertex_project": "bank-risk",
                "vertex_region": "europe-west1",
                "vertex_base_url": f"{fake.base_url}/v1",
                "providers": {"vertex": vertex_with_token()},
            }
        answers = {}
        for side in (first, second):
            (policy_dir / "cloud_summary.toml").write_text(policies[side])
            gw = make_gateway(**dict(settings))
            answer = gw.complete("cloud_summary", PROMPT)
            assert not answer.cached, f"{side} was served the other transport's answer"
            again = gw.complete("cloud_summary", PROMPT)
            assert again.cached and again.request_hash == answer.request_hash
            answers[side] = answer
        assert len(fake.requests) == 1 and len(fake_api.requests) == 1
        assert answers["anthropic"].request_hash != answers["cloud"].request_hash
    _verify(db_path)
