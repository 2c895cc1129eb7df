"""--live and --model against the loopback fake: diffs, similarity, skips, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStore
from gateway.catalog import Catalog
from gateway.replay import Mode, Outcome
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import Recorded
from tests.replay.helpers import RETIRED_OPUS_4_6, override, replay, replay_events


def test_a_different_answer_is_a_diff_with_a_similarity(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    sent_before = len(fake_api.requests)
    fake_api.script(Reply.ok(text="Verdict: NOT compliant.\nNo rule breached."))
    report = replay(recorded.url, recorded.ids["compliance"], base_url=recorded.base_url, live=True)
    row = report.requests[0]
    assert row.outcome is Outcome.DIFFERING
    assert row.similarity is not None and 0.5 < row.similarity < 1.0
    assert "-Verdict: compliant." in (row.text_diff or "")
    assert "+Verdict: NOT compliant." in (row.text_diff or "")
    # the recorded wire body went out again, unchanged
    assert fake_api.requests[sent_before].body == fake_api.requests[0].body
    event = replay_events(recorded.url)[0]
    assert event.data["mode"] == "live" and set(event.payload_digests) == {
        "request_body",
        "response_body",
    }


def test_the_same_answer_is_identical(recorded: Recorded, fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.ok(text="Idea: momentum on FX majors."))
    report = replay(recorded.url, recorded.ids["quant"], base_url=recorded.base_url, live=True)
    assert report.requests[0].outcome is Outcome.IDENTICAL
    assert report.requests[0].similarity == 1.0


def test_a_json_task_gets_a_field_by_field_diff(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(
        Reply.ok(json_text='{"counterparty": "ACME", "amount": 250, "currency": "EUR"}')
    )
    report = replay(recorded.url, recorded.ids["json"], base_url=recorded.base_url, live=True)
    changes = {(c.path, c.change) for c in report.requests[0].json_changes}
    assert changes == {("$.amount", "changed"), ("$.value_date", "removed")}


def test_a_retired_model_is_skipped_with_a_reason(
    recorded: Recorded, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    sent_before = len(fake_api.requests)
    catalog = Catalog.load(override(tmp_path, RETIRED_OPUS_4_6))
    report = replay(
        recorded.url, recorded.ids["quant"], base_url=recorded.base_url, live=True, catalog=catalog
    )
    row = report.requests[0]
    assert row.outcome is Outcome.SKIPPED
    assert "retired on 2026-01-15" in (row.reason or "")
    assert len(fake_api.requests) == sent_before


def test_a_failed_call_is_a_failed_row(recorded: Recorded, fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.error(400))
    report = replay(recorded.url, recorded.ids["quant"], base_url=recorded.base_url, live=True)
    assert report.requests[0].outcome is Outcome.FAILED
    assert report.any_failed


def test_a_local_request_is_replayed_on_the_local_model(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    sent_before = len(fake_api.requests)
    report = replay(recorded.url, recorded.ids["local"], live=True)  # no base_url: no Claude
    assert report.requests[0].outcome in (Outcome.IDENTICAL, Outcome.DIFFERING)
    assert report.requests[0].similarity is not None
    assert len(fake_api.requests) == sent_before


def test_a_model_that_cannot_honour_the_policy_is_a_refusal_with_findings(
    recorded: Recorded,
) -> None:
    report = replay(recorded.url, recorded.ids["compliance"], model="claude-opus-5-5")
    row = report.requests[0]
    assert report.summary.mode is Mode.MODEL
    assert row.outcome is Outcome.REFUSED
    assert any("temperature" in f for f in row.findings)
    event = replay_events(recorded.url)[0]
    assert event.data["target_model"] == "claude-opus-5-5"
    with AuditStore.open(recorded.url, "os") as store:
        content = store.policy_content(str(event.policy_fingerprint))
    assert content is not None and content["model_id"] == "claude-opus-5-5"


def test_a_compatible_model_changes_only_the_model_id(recorded: Recorded) -> None:
    report = replay(recorded.url, recorded.ids["compliance"], model="claude-opus-4-6")
    row = report.requests[0]
    assert row.outcome is Outcome.IDENTICAL, row.request_changes
    assert row.target_model == "claude-opus-4-6"


def test_model_live_sends_the_new_request_and_diffs(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text="Verdict: compliant.\nNo rule breached."))
    report = replay(
        recorded.url,
        recorded.ids["compliance"],
        base_url=recorded.base_url,
        live=True,
        model="claude-opus-4-6",
    )
    assert report.requests[0].outcome is Outcome.IDENTICAL
    assert fake_api.requests[-1].json is not None
    assert fake_api.requests[-1].json["model"] == "claude-opus-4-6"


@pytest.mark.parametrize("model", ["claude-nonexistent-9", "claude-mythos-preview"])
def test_an_unknown_or_retired_target_is_bad_input(recorded: Recorded, model: str) -> None:
    from gateway.errors import InputError

    with pytest.raises(InputError):
        replay(recorded.url, recorded.ids["compliance"], model=model)
    assert replay_events(recorded.url) == []
