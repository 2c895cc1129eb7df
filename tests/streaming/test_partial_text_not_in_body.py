"""A stream that ends early keeps what it had delivered as a payload, never in the event body.

Event bodies are what a PostgreSQL reviewer may read directly (migration 0015 leaves it the
events, not the content): before, a CANCELLED or FAILED event's ``partial.text`` put the
answer delivered so far in the body, where that role read it with no ACCESS record.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import Gateway, UpstreamError
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.streaming.conftest import events, partial_text, terminal, verified

TEXT = "quebec romeo sierra tango uniform victor"
PROMPT = "Summarise the exposure of desk 7 to EUR rates"


def _bodies_hold(db_path: Path, request_id: str, text: str) -> bool:
    return any(text.encode() in e.body for e in events(db_path, request_id))


def test_a_cancelled_stream_keeps_its_partial_text_out_of_the_body(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=6, delay=0.02))
    seen = 0
    with gw.stream("chat", PROMPT) as s:
        for event in s:
            if event["type"] == "content_block_delta":
                seen += 1
                if seen == 2:
                    break
    end = terminal(db_path, s.request_id)
    assert str(end.kind) == "cancelled"
    assert partial_text(db_path, end) == "quebec romeo "
    assert not _bodies_hold(db_path, s.request_id, "quebec")
    verified(db_path)


def test_a_failed_stream_keeps_its_partial_text_out_of_the_body(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.stream(TEXT, deltas=6, delay=0.02, error_after=2))
    with pytest.raises(UpstreamError), gw.stream("chat", PROMPT) as s:
        for _event in s:
            pass
    end = terminal(db_path, s.request_id)
    assert str(end.kind) == "failed"
    assert partial_text(db_path, end) == "quebec romeo "
    assert not _bodies_hold(db_path, s.request_id, "quebec")
    verified(db_path)
