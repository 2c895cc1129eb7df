"""An answer that stopped at one of the policy's stop sequences says which, through `gateway
serve` to the official Python SDK: plain, streamed, and served again from the replay cache."""

from __future__ import annotations

import itertools

import anthropic
import pytest

from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.slow  # `gateway serve` as a process

STOP = "</reasons>"  # compliance_review's [generation] stop_sequences
_count = itertools.count()


def fresh() -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Transaction: {next(_count)} CHF to Umbrella"}]


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> anthropic.Anthropic:
    key = server.create_key("treasury-svc")
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0)


def test_a_plain_answer_names_the_stop_sequence_it_stopped_at(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="<verdict>clear</verdict><reasons>none", stop_sequence=STOP))
    prompt = fresh()
    message = client.messages.create(model="compliance_review", max_tokens=512, messages=prompt)
    sent = fake.requests[-1].json
    assert sent is not None and sent["stop_sequences"] == [STOP]
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", STOP)
    # The same request again is a replay hit: the recorded answer keeps its stop sequence.
    upstream_before = len(fake.requests)
    again = client.messages.with_raw_response.create(
        model="compliance_review", max_tokens=512, messages=prompt
    )
    assert again.headers["x-gateway-cached"] == "true"
    assert len(fake.requests) == upstream_before
    replayed = again.parse()
    assert (replayed.stop_reason, replayed.stop_sequence) == ("stop_sequence", STOP)


def test_an_answer_that_ended_its_turn_has_no_stop_sequence(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.ok(text="<verdict>clear</verdict>"))
    message = client.messages.create(model="compliance_review", max_tokens=512, messages=fresh())
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)


def test_a_streamed_answer_names_the_stop_sequence_in_its_message_delta(
    client: anthropic.Anthropic, fake: FakeMessagesAPI
) -> None:
    fake.script(Reply.stream("<verdict>hold</verdict><reasons>sanctions", stop_sequence=STOP))
    prompt = fresh()
    with client.messages.stream(
        model="compliance_review", max_tokens=512, messages=prompt
    ) as stream:
        deltas = [e for e in stream if e.type == "message_delta"]
        final = stream.get_final_message()
    assert [(d.delta.stop_reason, d.delta.stop_sequence) for d in deltas] == [
        ("stop_sequence", STOP)
    ]
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", STOP)
    # Streamed again from the replay cache: the recorded message's stop sequence.
    with client.messages.stream(
        model="compliance_review", max_tokens=512, messages=prompt
    ) as stream:
        assert stream.response.headers.get("request-id")
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", STOP)


def test_zz_the_log_verifies(server: ServerProcess) -> None:
    done = server.verify()
    assert done.returncode == 0, done.stdout + done.stderr
