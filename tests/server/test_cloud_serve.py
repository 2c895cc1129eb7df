"""`gateway serve` is unchanged for callers when a policy sends a task to Bedrock: the official
SDK speaks the Messages API to the gateway (a real process), the gateway signs and sends the
request to the loopback Bedrock fake, and the record and `gateway audit verify` hold."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import anthropic
import pytest

from tests.fakes.cloud_apis import FakeBedrock
from tests.fakes.cloud_auth import AWS_KEY_ID, aws_test_environment
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.cloud_policies import summary_policy
from tests.server.conftest import SHIPPED, ServerProcess, server_env

pytestmark = pytest.mark.slow  # `gateway serve` as a process

REGION = "eu-central-1"
MODEL_ID = "eu.anthropic.claude-sonnet-4-6"
POLICY = summary_policy("bedrock", rest="\n[caller]\nmax_tokens = { min = 16, max = 1024 }\n")


@pytest.fixture(scope="module")
def bedrock() -> Iterator[FakeBedrock]:
    with FakeBedrock(region=REGION) as fake:
        yield fake


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI, bedrock: FakeBedrock
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("serve-bedrock")
    shutil.copytree(SHIPPED, home / "policies")
    (home / "policies" / "cloud_summary.toml").write_text(POLICY)
    env = {
        "GATEWAY_BEDROCK_REGION": REGION,
        "GATEWAY_BEDROCK_BASE_URL": bedrock.base_url,
        **aws_test_environment(home),
    }
    running = ServerProcess(home, server_env(home, fake.base_url, **env))
    running.cli("db", "upgrade")
    running.start(ready_within=120)  # builds the Bedrock client (boto) on a busy host
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> anthropic.Anthropic:
    key = server.create_key("risk-svc")
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def test_the_sdk_is_answered_from_bedrock_through_the_policy(
    server: ServerProcess,
    client: anthropic.Anthropic,
    bedrock: FakeBedrock,
    fake: FakeMessagesAPI,
) -> None:
    sent_first_party = len(fake.requests)
    raw = client.messages.with_raw_response.create(
        model="cloud_summary",
        max_tokens=512,
        messages=[{"role": "user", "content": "Exposure of counterparty 4711"}],
    )
    message = raw.parse()
    assert message.content[0].text == "The fake cloud model answers."  # type: ignore[union-attr]
    request_id = raw.headers["request-id"]
    received = bedrock.requests[-1]
    assert received.path == f"/model/{MODEL_ID}/invoke"
    assert received.json["anthropic_version"] == "bedrock-2023-05-31"
    assert received.json["max_tokens"] == 512
    assert received.headers["authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/"
    )
    assert len(fake.requests) == sent_first_party  # nothing went to Anthropic's API
    recorded = [e for e in server.audit_events() if e.request_id == request_id]
    assert [str(e.kind) for e in recorded] == ["request", "response"]
    assert recorded[0].data["provider"] == "bedrock"
    assert recorded[0].data["target"]["url"].endswith(received.path)
    assert server.verify().returncode == 0


def test_a_streamed_answer_comes_from_bedrocks_event_stream(
    server: ServerProcess, client: anthropic.Anthropic, bedrock: FakeBedrock
) -> None:
    with client.messages.stream(
        model="cloud_summary",
        max_tokens=256,
        messages=[{"role": "user", "content": "Exposure of counterparty 4712"}],
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == "The fake cloud model answers."
    assert bedrock.requests[-1].path == f"/model/{MODEL_ID}/invoke-with-response-stream"
    assert server.verify().returncode == 0


def test_a_repeat_is_replayed_without_reaching_bedrock(
    client: anthropic.Anthropic, bedrock: FakeBedrock
) -> None:
    def ask() -> anthropic.types.Message:
        return client.messages.create(
            model="cloud_summary",
            max_tokens=300,
            messages=[{"role": "user", "content": "Exposure of counterparty 4713"}],
        )

    ask()
    sent = len(bedrock.requests)
    again = ask()
    assert again.content[0].text == "The fake cloud model answers."  # type: ignore[union-attr]
    assert len(bedrock.requests) == sent
