"""No caller learns of another's request from the answer's headers: what desk B's answer
carries is the same whether desk A did nothing, asked a question again or asked a new one
in between. The audit seq (which counts every caller's events) is not sent unless a
deployment sets GATEWAY_SERVER_SEQ_HEADER; the request id is random."""

from __future__ import annotations

import anthropic
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` as a process

# What differs between any two answers whatever others do: the id and the clock.
_PER_ANSWER = {"request-id", "date"}


def ask(client: anthropic.Anthropic, question: str) -> dict[str, str]:
    raw = client.messages.with_raw_response.create(
        model="compliance_review",
        max_tokens=512,
        messages=[{"role": "user", "content": question}],
    )
    return {k: v for k, v in raw.headers.items() if k.lower() not in _PER_ANSWER}


def test_desk_b_cannot_tell_what_desk_a_did_in_between(
    server: ServerProcess, fake: FakeMessagesAPI
) -> None:
    fake.set_default(lambda _request: Reply.ok(text="No finding."))
    desk_a = anthropic.Anthropic(
        base_url=server.base_url, api_key=server.create_key("desk-a"), max_retries=0
    )
    desk_b = anthropic.Anthropic(
        base_url=server.base_url, api_key=server.create_key("desk-b"), max_retries=0
    )
    ask(desk_a, "Desk A: transaction 1")
    seen: dict[str, list[dict[str, str]]] = {}
    for n, desk_a_does in enumerate(["nothing", "asks again", "asks anew"] * 2):
        before = ask(desk_b, f"Desk B: transaction {n}")
        if desk_a_does == "asks again":
            ask(desk_a, "Desk A: transaction 1")
        elif desk_a_does == "asks anew":
            ask(desk_a, f"Desk A: transaction {n + 100}")
        again = ask(desk_b, f"Desk B: transaction {n}")  # a replay hit of its own
        seen.setdefault(desk_a_does, []).append(again)
        assert "x-gateway-seq" not in before and "x-gateway-seq" not in again
    shapes = {tuple(sorted(h.items())) for answers in seen.values() for h in answers}
    assert len(shapes) == 1, shapes
