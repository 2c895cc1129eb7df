"""One SDK call through `gateway serve` makes at most the gateway's own upstream attempts.

The gateway retries a 529 itself (GATEWAY_MAX_ATTEMPTS); once those attempts are spent its
answer says ``x-should-retry: false``, so the official SDK does not multiply them by its own
retries (a 529 storm once turned one call into 12 upstream attempts).
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess, server_env

# Starts processes (gateway serve, fresh interpreters): outside the fast loop.
pytestmark = pytest.mark.slow

ATTEMPTS = 3


@pytest.fixture(scope="module")
def storm_server(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("storm")
    env = server_env(
        home, fake.base_url, GATEWAY_MAX_ATTEMPTS=str(ATTEMPTS), GATEWAY_RETRY_BACKOFF_BASE_S="0"
    )
    server = ServerProcess(home, env)
    server.cli("db", "upgrade")
    server.start(ready_within=120)  # a busy host takes its time to import the ASGI stack
    try:
        yield server
    finally:
        server.stop()


def test_a_529_storm_costs_one_sdk_call_the_gateways_attempts_only(
    storm_server: ServerProcess, fake: FakeMessagesAPI
) -> None:
    key = storm_server.create_key("payments-svc")
    # The SDK's own retries on: they are what multiplied the attempts.
    client = anthropic.Anthropic(base_url=storm_server.base_url, api_key=key, max_retries=3)
    fake.set_default(lambda _request: Reply.error(529))
    before = len(fake.requests)
    try:
        with pytest.raises(anthropic.InternalServerError) as failed:
            client.messages.create(
                model="compliance_review",
                max_tokens=256,
                messages=[{"role": "user", "content": "Is this storm over yet?"}],
            )
    finally:
        fake.set_default(lambda _request: Reply.ok())
    assert failed.value.status_code == 529
    assert failed.value.response.headers["x-should-retry"] == "false"
    assert len(fake.requests) - before == ATTEMPTS


def test_a_refused_request_was_never_retried_by_the_sdk_either(
    storm_server: ServerProcess, fake: FakeMessagesAPI
) -> None:
    key = storm_server.create_key("desk-7")
    client = anthropic.Anthropic(base_url=storm_server.base_url, api_key=key, max_retries=3)
    before = len(fake.requests)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(
            model="no_such_task",
            max_tokens=256,
            messages=[{"role": "user", "content": "hello"}],
        )
    assert len(fake.requests) == before
