"""The gateway does not follow upstream redirects: a 3xx would send another request than the
one recorded (a 303 turns the POST into a bodiless GET to wherever it points), and its answer
would be served, and replayed, as the answer to the recorded request (invariant 3). A 3xx is
the upstream's answer instead: the call fails closed and nothing reaches the other host."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway import AsyncGateway, Gateway
from gateway.errors import UpstreamError
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import kinds, settings_for


@pytest.mark.parametrize("status", [303, 307])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_redirect_is_not_followed_and_the_call_fails_closed(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI, status: int, mode: str
) -> None:
    with FakeMessagesAPI() as elsewhere:
        elsewhere.script(Reply.ok(text="an answer from another host"))
        fake_api.script(Reply.redirect(status, f"{elsewhere.base_url}/v1/messages"))
        settings = settings_for(policy_dir, db_path, fake_api.base_url)
        with pytest.raises(UpstreamError) as raised:
            if mode == "sync":
                with Gateway(settings) as gw:
                    gw.complete("quant_strategy", "ideas", caller="research")
            else:

                async def run() -> None:
                    async with AsyncGateway(settings) as gw:
                        await gw.complete("quant_strategy", "ideas", caller="research")

                asyncio.run(run())
        assert elsewhere.requests == []
    assert len(fake_api.requests) == 1
    request_id = raised.value.request_id
    assert request_id is not None
    assert kinds(db_path, request_id) == ["request", "attempt_failed", "failed"]  # not retried
