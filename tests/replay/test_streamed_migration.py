"""A streamed recording compares with its migration as an answer: the re-planned request is
not "differing" because the recorded body said "stream": true."""

from __future__ import annotations

from gateway import Gateway
from gateway.replay import Outcome
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY, Recorded
from tests.replay.helpers import replay


def test_a_streamed_request_migrates_as_identical(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.stream("Verdict: compliant.\nNo rule breached."))
    gw = Gateway(policy_dir=recorded.policy_dir, database_url=recorded.url,
                 anthropic_api_key=API_KEY, base_url=recorded.base_url,
                 durability="os")  # fmt: skip
    with gw, gw.stream("compliance_review", "Pay 20 EUR to ACME.", caller="pay") as stream:
        for _event in stream:
            pass
    report = replay(recorded.url, stream.request_id, model="claude-opus-4-6")
    row = report.requests[0]
    assert row.outcome is Outcome.IDENTICAL, row.request_changes
    assert all(c.path != "$.stream" for c in row.request_changes)
