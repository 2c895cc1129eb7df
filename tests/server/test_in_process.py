"""The serving front end in this process (uvicorn in a thread), for the fast loop: an answer
through the policy under the key's caller, a stream, and the API's typed errors. The other
modules here run `gateway serve` as a real process (marked slow)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator

import anthropic
import pytest
import uvicorn

from audit import AuditStore
from gateway.callers import CallerKeys
from gateway.server import create_app
from gateway.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import SHIPPED, UPSTREAM_KEY

PROMPT = [{"role": "user", "content": "Transaction: 7 EUR to ACME, in process"}]


class InProcessServer:
    """``create_app(settings)`` on uvicorn in a daemon thread, on a free loopback port."""

    def __init__(self, settings: Settings) -> None:
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=0,
            lifespan="on",
            log_level="warning",
            access_log=False,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> InProcessServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    @property
    def base_url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI) -> Settings:
    home = tmp_path_factory.mktemp("in-process")
    shutil.copytree(SHIPPED, home / "policies")
    return Settings(
        policy_dir=home / "policies",
        database_url=f"sqlite:///{home / 'audit.db'}",
        durability="os",
        anthropic_api_key=UPSTREAM_KEY,
        anthropic_base_url=fake.base_url,
    )


@pytest.fixture(scope="module")
def key(settings: Settings) -> str:
    with CallerKeys.open(settings) as keys:
        return keys.create("payments-svc").key


@pytest.fixture(scope="module")
def server(settings: Settings, key: str) -> Iterator[InProcessServer]:
    with InProcessServer(settings) as running:
        yield running


@pytest.fixture
def client(server: InProcessServer, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def events_of(settings: Settings, request_id: str) -> list[tuple[str, str | None]]:
    with AuditStore.open(settings.database_url, "os", create=False) as store:
        return [(str(e.kind), e.caller) for e in store.iter_events() if e.request_id == request_id]


def test_a_message_is_answered_through_the_policy_and_recorded_under_the_key_caller(
    settings: Settings, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="No finding."))
    raw = client.messages.with_raw_response.create(
        model="compliance_review", max_tokens=1024, messages=PROMPT
    )
    message = raw.parse()
    assert message.content[0].text == "No finding."  # type: ignore[union-attr]
    assert message.model == "claude-sonnet-4-6"  # the policy's model, not the task name
    assert message.id == raw.headers["request-id"]
    assert events_of(settings, message.id) == [
        ("request", "payments-svc"),
        ("response", "payments-svc"),
    ]
    sent = fake.requests[-1]
    assert sent.json is not None and sent.json["model"] == "claude-sonnet-4-6"
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the gateway's own key


def test_a_stream_is_relayed_and_recorded(
    settings: Settings, client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.stream("Alpha beta gamma delta", deltas=4))
    with client.messages.stream(
        model="quant_strategy",
        max_tokens=512,
        messages=[{"role": "user", "content": "Ideas, streamed in process"}],
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Alpha beta gamma delta"
    assert [kind for kind, _ in events_of(settings, final.id)] == ["request", "response"]


def test_an_unknown_key_and_an_unknown_task_get_the_apis_typed_errors(
    server: InProcessServer, client: anthropic.Anthropic
) -> None:
    stranger = anthropic.Anthropic(base_url=server.base_url, api_key="gw-nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        stranger.messages.create(model="compliance_review", max_tokens=64, messages=PROMPT)
    with pytest.raises(anthropic.NotFoundError) as unknown:
        client.messages.create(model="no_such_task", max_tokens=64, messages=PROMPT)
    assert unknown.value.response.headers["request-id"]
