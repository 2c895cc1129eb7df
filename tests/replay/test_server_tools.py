"""A request that offers provider-run tools depends on the outside world: its record is marked
not replayable, replay says so in every mode, and the replay cache never serves it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit import AuditStore, EventKind
from gateway import Gateway
from gateway.replay import Outcome
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY
from tests.replay.helpers import replay, replay_events

SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
PROMPT = "Is ACME Shipping Ltd in the news this week?"


def _searching_task(policy_dir: Path) -> str:
    """sanctions_screening (cache mode replay) with web search allow-listed beside its tool."""
    lookup = json.loads((policy_dir / "tools" / "lookup_entity.json").read_text("utf-8"))
    (policy_dir / "tools" / "with_search.json").write_text(
        json.dumps([*lookup, SEARCH]), encoding="utf-8"
    )
    text = (policy_dir / "sanctions_screening.toml").read_text(encoding="utf-8")
    text = text.replace('file = "tools/lookup_entity.json"', 'file = "tools/with_search.json"')
    text = text.replace("[tools]\n", '[tools]\nserver = ["web_search_20250305"]\n')
    assert 'mode = "replay"' in text
    (policy_dir / "news_screening.toml").write_text(text, encoding="utf-8")
    return "news_screening"


def _gateway(policy_dir: Path, url: str, fake_api: FakeMessagesAPI) -> Gateway:
    return Gateway(
        policy_dir=policy_dir,
        database_url=url,
        anthropic_api_key=API_KEY,
        base_url=fake_api.base_url,
        durability="os",
    )


@pytest.fixture
def searched(policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI) -> str:
    task = _searching_task(policy_dir)
    fake_api.script(Reply.ok(text="No news found."))
    with _gateway(policy_dir, sqlite_url, fake_api) as gw:
        return gw.complete(task, PROMPT, caller="news-desk").request_id


def test_the_request_record_says_it_is_not_replayable(searched: str, sqlite_url: str) -> None:
    with AuditStore.open(sqlite_url, "os") as store:
        request = store.events_for_request(searched)[0]
    assert request.kind is EventKind.REQUEST
    assert "web_search_20250305" in request.data["not_replayable"]


def test_an_identical_request_is_sent_again_not_served_from_the_log(
    searched: str, policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text="One article found."))
    with _gateway(policy_dir, sqlite_url, fake_api) as gw:
        again = gw.complete("news_screening", PROMPT, caller="news-desk")
    assert not again.cached and again.text == "One article found."
    assert len(fake_api.requests) == 2
    with AuditStore.open(sqlite_url, "os") as store:
        kinds = [e.kind for e in store.events_for_request(again.request_id)]
    assert EventKind.CACHE_HIT not in kinds and EventKind.RESPONSE in kinds


@pytest.mark.parametrize(
    ("live", "model"),
    [(True, None), (False, "claude-opus-4-6"), (True, "claude-opus-4-6")],
    ids=["live", "model", "model-live"],
)
def test_every_resending_replay_mode_reports_it_as_not_replayable(
    searched: str,
    sqlite_url: str,
    fake_api: FakeMessagesAPI,
    live: bool,
    model: str | None,
) -> None:
    sent = len(fake_api.requests)
    report = replay(sqlite_url, searched, base_url=fake_api.base_url, live=live, model=model)
    (row,) = report.requests
    assert row.outcome is Outcome.SKIPPED
    assert row.reason is not None and "outside world" in row.reason
    assert "web_search_20250305" in row.reason
    assert not report.any_failed and row.checks == ()
    assert len(fake_api.requests) == sent  # nothing re-sent
    (event,) = replay_events(sqlite_url)
    assert event.data["outcome"] == "skipped"


def test_verify_still_checks_such_a_record_offline(
    searched: str, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    """Verify re-plans and compares hashes and bodies without sending: the outside world
    has no say in it, so a record of provider-run tools is checked like any other."""
    sent = len(fake_api.requests)
    report = replay(sqlite_url, searched, base_url=fake_api.base_url)
    (row,) = report.requests
    assert row.outcome is Outcome.PASSED, row.reason
    assert row.checks and all(c.ok for c in row.checks)
    assert len(fake_api.requests) == sent  # nothing re-sent
