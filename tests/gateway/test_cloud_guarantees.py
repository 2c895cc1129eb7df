"""Every guarantee on each cloud transport, against the loopback fakes of Bedrock and Vertex:
tool use and prompt caching (the cache's writes and reads in the recorded usage), a throttling
storm (Bedrock's ThrottlingException, Vertex's 429) ending in the same typed error as on
Anthropic's API, a stream that breaks off, a top-level cache_control that is never sent, and a
process killed with SIGKILL in the middle of a call (nothing acknowledged is lost). The log
verifies after each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore
from audit.verify import verify_log
from gateway import InputError, PolicyViolation, UpstreamError, UpstreamUnavailable
from tests.fakes.cloud_apis import TOOL_INPUT, CloudReply, FakeBedrock, FakeVertex
from tests.fakes.cloud_auth import GOOGLE_TOKEN, vertex_with_token
from tests.gateway.cloud_policies import MODEL_LINES, summary_policy
from tests.gateway.conftest import MakeGateway, events

pytestmark = pytest.mark.usefixtures("aws_credentials")  # botocore finds the static test key

CHILD = Path(__file__).with_name("cloud_child.py")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Cloud:
    name: str
    fake: Any
    settings: dict[str, Any]  # for make_gateway (Settings values, and provider overrides)

    def policy(self, text: str) -> str:
        """``text`` (a policy on Anthropic's API) sent over this cloud."""
        model = 'id = "claude-sonnet-4-6"'  # a comment may follow on its line
        return text.replace(model, f"{model}\n{MODEL_LINES[self.name]}", 1)

    def serializable(self) -> dict[str, Any]:
        return {k: v for k, v in self.settings.items() if k != "providers"}


@pytest.fixture(params=["bedrock", "vertex"])
def cloud(request: pytest.FixtureRequest) -> Iterator[Cloud]:
    if request.param == "bedrock":
        with FakeBedrock(region="eu-central-1") as fake:
            yield Cloud(
                "bedrock",
                fake,
                {"bedrock_region": "eu-central-1", "bedrock_base_url": fake.base_url},
            )
    else:
        with FakeVertex(token=GOOGLE_TOKEN) as fake:
            yield Cloud(
                "vertex",
                fake,
                {
                    "vertex_project": "bank-risk",
                    "vertex_region": "europe-west1",
                    "vertex_base_url": f"{fake.base_url}/v1",
                    "providers": {"vertex": vertex_with_token()},
                },
            )


def _verify(db_path: Path) -> None:
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        report = verify_log(store)
    assert report.ok, report


def _recorded(db_path: Path, request_id: str, kind: str) -> Any:
    return next(e for e in events(db_path) if e.request_id == request_id and e.kind == kind)


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
def test_tool_use_and_prompt_caching_show_in_the_record(
    cloud: Cloud, make_gateway: MakeGateway, policy_dir: Path, db_path: Path, streamed: bool
) -> None:
    """The shipped sanctions screening (a cached system prompt, a strict tool) over a cloud:
    the breakpoint goes in the block form the cloud takes (never a top-level cache_control,
    which the fakes refuse as the clouds do), the model's tool call comes back, and the
    recorded usage shows the first request writing the cache and the next reading it."""
    screening = (policy_dir / "sanctions_screening.toml").read_text()
    (policy_dir / "cloud_screening.toml").write_text(cloud.policy(screening))
    gw = make_gateway(**cloud.settings)
    ids = []
    for prompt in ("Payment 1 to ACME Shipping Ltd", "Payment 2 to ACME Shipping Ltd"):
        if streamed:
            with gw.stream("cloud_screening", prompt) as stream:
                for _ in stream:
                    pass
            ids.append(stream.result.request_id)
        else:
            ids.append(gw.complete("cloud_screening", prompt).request_id)
    sent = [request.json for request in cloud.fake.requests]
    assert all("cache_control" not in body for body in sent)
    assert sent[0]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    usage = [_recorded(db_path, rid, "response").data["usage"] for rid in ids]
    assert usage[0]["cache_creation_input_tokens"] > 0 and usage[0]["cache_read_input_tokens"] == 0
    assert usage[1]["cache_read_input_tokens"] == usage[0]["cache_creation_input_tokens"]
    assert usage[1]["cache_creation_input_tokens"] == 0
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        answer = json.loads(
            store.payload(_recorded(db_path, ids[0], "response").payload_digests["response_body"])
        )
    assert answer["stop_reason"] == "tool_use"
    assert answer["content"][-1]["input"] == TOOL_INPUT
    _verify(db_path)


def test_a_throttling_storm_ends_in_the_typed_error_of_a_rate_limit(
    cloud: Cloud, make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    """Bedrock's ThrottlingException and Vertex's 429 RESOURCE_EXHAUSTED are rate limits: each
    attempt is recorded and retried, and a storm longer than the attempts allowed ends in the
    error a caller gets for a rate limit on Anthropic's API (UpstreamUnavailable); one that
    passes within them is answered."""
    (policy_dir / "cloud_summary.toml").write_text(summary_policy(cloud.name))
    gw = make_gateway(**cloud.settings)
    cloud.fake.script(*[CloudReply.throttled()] * 4)
    with pytest.raises(UpstreamUnavailable) as caught:
        gw.complete("cloud_summary", "Exposure of counterparty 1")
    error = caught.value
    assert error.error_type == "rate_limit_error" and error.status == 429 and error.attempts == 4
    assert [str(e.kind) for e in events(db_path) if e.request_id == error.request_id] == [
        "request",
        *["attempt_failed"] * 4,
        "failed",
    ]
    cloud.fake.script(*[CloudReply.throttled()] * 3)
    answer = gw.complete("cloud_summary", "Exposure of counterparty 2")
    assert [str(e.kind) for e in events(db_path) if e.request_id == answer.request_id] == [
        "request",
        *["attempt_failed"] * 3,
        "response",
    ]
    assert len(cloud.fake.requests) == 8
    _verify(db_path)


def test_a_stream_that_breaks_off_ends_in_failed(
    cloud: Cloud, make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    """Bedrock's exception frame or Vertex's error event after part of the answer: the caller
    gets the typed error after what arrived, the record ends in FAILED, nothing is resent."""
    (policy_dir / "cloud_summary.toml").write_text(summary_policy(cloud.name))
    gw = make_gateway(**cloud.settings)
    cloud.fake.script(CloudReply.fails_mid_stream())
    seen: list[Any] = []
    with pytest.raises(UpstreamError), gw.stream("cloud_summary", "Exposure of 3") as stream:
        seen.extend(stream)
    assert seen and len(cloud.fake.requests) == 1
    assert [str(e.kind) for e in events(db_path)][-1] == "failed"
    _verify(db_path)


def test_a_top_level_cache_control_is_refused_before_sending(
    cloud: Cloud, make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    """Automatic caching (a top-level cache_control) is a 400 on Bedrock and Vertex: a caller
    that asks for it is refused by the policy, recorded REJECTED, and nothing is sent."""
    (policy_dir / "cloud_summary.toml").write_text(summary_policy(cloud.name))
    gw = make_gateway(**cloud.settings)
    with pytest.raises(PolicyViolation, match=r"refused by Bedrock and Vertex") as caught:
        gw.complete(
            "cloud_summary", "Exposure of 4", overrides={"cache_control": {"type": "ephemeral"}}
        )
    assert caught.value.key == "prompt.cache"
    assert cloud.fake.requests == []
    assert [str(e.kind) for e in events(db_path)] == ["rejected"]
    _verify(db_path)


@pytest.mark.slow  # a gateway process of its own
def test_a_process_killed_mid_call_loses_nothing_acknowledged(
    cloud: Cloud, make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    """SIGKILL while the cloud is answering: the answer acknowledged before is in the log with
    its RESPONSE, the call in flight shows as a REQUEST without an outcome (incomplete), the
    log verifies, and a gateway started afterwards replays the acknowledged answer."""
    (policy_dir / "cloud_summary.toml").write_text(summary_policy(cloud.name))
    cloud.fake.script(CloudReply.ok(), CloudReply.hangs())
    settings = {
        "policy_dir": str(policy_dir),
        "database_url": f"sqlite:///{db_path}",
        "durability": "os",
        "default_caller": "tests",
        **cloud.serializable(),
    }
    command = {
        "settings": settings,
        "task": "cloud_summary",
        "prompts": ["Exposure of counterparty 5", "Exposure of counterparty 6"],
        "vertex_token": GOOGLE_TOKEN if cloud.name == "vertex" else None,
    }
    child = subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(command)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        acked = json.loads(child.stdout.readline() or "{}")
        assert acked.get("event") == "ack", child.stderr.read() if child.stderr else ""
        assert cloud.fake.wait_for_requests(2)  # the second call is at the cloud
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    by_request: dict[str, list[str]] = {}
    for event in events(db_path):
        by_request.setdefault(event.request_id, []).append(str(event.kind))
    assert by_request.pop(acked["request_id"]) == ["request", "response"]
    assert list(by_request.values()) == [["request"]]  # in flight: incomplete
    _verify(db_path)
    gw = make_gateway(**cloud.settings)
    again = gw.complete("cloud_summary", "Exposure of counterparty 5")
    assert again.cached and len(cloud.fake.requests) == 2
    _verify(db_path)


def test_token_counting_is_recorded_on_vertex_and_refused_on_bedrock(
    cloud: Cloud, make_gateway: MakeGateway, policy_dir: Path, db_path: Path
) -> None:
    """Vertex counts at its count-tokens endpoint: the TOKEN_COUNT record holds the bytes it
    received and where they went. Bedrock's InvokeModel has no counting endpoint: the count is
    refused, in one line, before anything is sent."""
    (policy_dir / "cloud_summary.toml").write_text(summary_policy(cloud.name))
    gw = make_gateway(**cloud.settings)
    if cloud.name == "bedrock":
        with pytest.raises(InputError, match="does not count tokens"):
            gw.count_tokens("cloud_summary", "Exposure of counterparty 7")
        assert cloud.fake.requests == []
        return
    assert gw.count_tokens("cloud_summary", "Exposure of counterparty 7") > 0
    (sent,) = cloud.fake.requests
    (counted,) = [e for e in events(db_path) if e.kind == "token_count"]
    with AuditStore.open(f"sqlite:///{db_path}", durability="os") as store:
        assert store.payload(counted.payload_digests["request_body"]) == sent.body
    assert counted.data["target"]["url"].endswith("/models/count-tokens:rawPredict")
    assert counted.data["target"]["region"] == "europe-west1"
    _verify(db_path)
