"""A live replay is an upstream call: its intent is committed first, its failed attempts too.

DESIGN §3, invariant 1 (no upstream call without a committed record) applies to
``replay --live`` and ``replay --model ID --live`` exactly as to ``Gateway.complete``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from audit import AuditStore, EventKind
from audit.errors import AuditStoreError
from audit.verify import verify_log
from gateway.catalog import Catalog
from gateway.errors import AuditWriteError
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.registry import Providers
from gateway.replay import Outcome, Replayer, ReplayReport, Selection
from gateway.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.replay.conftest import Recorded
from tests.replay.helpers import API_KEY, replay, replay_events


def _intents_seen_by_upstream(url: str, fake: FakeMessagesAPI) -> list[list[bytes]]:
    """Make the fake look into the audit log each time a request arrives."""
    seen: list[list[bytes]] = []

    def look(_request: RecordedRequest) -> Reply:
        with AuditStore.open(url, "os") as store:
            intents = [
                store.payload(e.payload_digests["request_body"])
                for e in store.iter_events(kind=EventKind.REPLAY)
                if e.data.get("phase") == "intent"
            ]
        seen.append(intents)
        return Reply.ok(text="Verdict: compliant.\nNo rule breached.")

    fake.set_default(look)
    return seen


@pytest.mark.parametrize("model", [None, "claude-opus-4-6"])
def test_the_intent_with_the_exact_wire_body_is_committed_before_the_send(
    recorded: Recorded, fake_api: FakeMessagesAPI, model: str | None
) -> None:
    before = len(fake_api.requests)
    seen = _intents_seen_by_upstream(recorded.url, fake_api)
    report = replay(
        recorded.url, recorded.ids["compliance"], base_url=recorded.base_url, live=True, model=model
    )
    [arrived] = fake_api.requests[before:]
    assert seen == [[arrived.body]]  # committed, and byte for byte what went on the wire
    [intent] = replay_events(recorded.url, phase="intent")
    [outcome] = replay_events(recorded.url)
    run_id = report.summary.run_id
    assert intent.request_id == outcome.request_id == run_id
    assert intent.seq < outcome.seq and outcome.data["intent_seq"] == intent.seq
    assert intent.data["original_request_id"] == recorded.ids["compliance"]
    assert intent.data["target_model"] == model and intent.data["provider"] == "anthropic"
    assert intent.request_hash == outcome.request_hash
    with AuditStore.open(recorded.url, "os") as store:
        assert verify_log(store).ok
        if model is not None:  # the migrated policy is stored with the intent already
            assert store.policy_content(str(intent.policy_fingerprint)) is not None


def _run(url: str, base_url: str, request_id: str, **provider: Any) -> ReplayReport:
    providers = Providers(
        Settings(),
        overrides={
            "anthropic": lambda _s: AnthropicProvider(
                api_key=API_KEY, base_url=base_url, sleep=lambda _s: None, **provider
            )
        },
    )
    try:
        with AuditStore.open(url, "os") as store:
            replayer = Replayer(store, Catalog.load(), providers)
            return replayer.run(replayer.prepare(Selection(request_ids=(request_id,)), live=True))
    finally:
        providers.close()


def test_each_failed_attempt_is_recorded_under_the_run(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    secret_prompt = "Name: Jane Doe\nIBAN: DE89 3704 0044 0532 0130 00"
    fake_api.script(
        Reply.error(529, retry_after=0, message=f"busy with {secret_prompt}"),
        Reply.error(400, message=f"bad {secret_prompt}"),
    )
    report = _run(recorded.url, recorded.base_url, recorded.ids["quant"], max_attempts=3)
    row = report.requests[0]
    assert row.outcome is Outcome.FAILED
    assert "Jane Doe" not in (row.reason or "")  # the report (and CLI) carry no upstream text
    with AuditStore.open(recorded.url, "os") as store:
        events = store.events_for_request(report.summary.run_id)
        quoted = store.payload(events[2].payload_digests["upstream_message"]).decode()
    kinds = [(e.kind, e.data.get("phase")) for e in events]
    assert kinds == [
        (EventKind.REPLAY, "intent"),
        (EventKind.ATTEMPT_FAILED, None),
        (EventKind.ATTEMPT_FAILED, None),
        (EventKind.REPLAY, "outcome"),
    ]
    first, second = events[1].data, events[2].data
    assert (first["status"], first["error_type"], first["will_retry"]) == (
        529,
        "overloaded_error",
        True,
    )
    assert (second["status"], second["will_retry"]) == (400, False)
    assert first["upstream_request_id"] and first["original_request_id"] == recorded.ids["quant"]
    assert "Jane Doe" not in first["message"]
    assert quoted == f"bad {secret_prompt}"  # for auditors, in the log only, as content
    assert "Jane Doe" not in str(second)  # not in the event's data
    assert events[3].data["attempts"] == 2


class _WriteLock:
    """The SQLite write lock held from another connection, as a busy writer would hold it."""

    def __init__(self, url: str) -> None:
        self._conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)

    def take(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def close(self) -> None:
        self._conn.close()  # rolls back, releasing the lock


def test_no_live_send_when_the_intent_cannot_be_committed(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    before = len(fake_api.requests)
    lock = _WriteLock(recorded.url)

    def provider(_settings: Settings) -> AnthropicProvider:
        # Built by prepare(), after the store opened and the selection loaded: from here on
        # nothing can be appended.
        lock.take()
        return AnthropicProvider(api_key=API_KEY, base_url=recorded.base_url, max_attempts=1)

    providers = Providers(Settings(), overrides={"anthropic": provider})
    try:
        with AuditStore.open(f"{recorded.url}?lock_timeout=0.2", "os") as store:
            replayer = Replayer(store, Catalog.load(), providers)
            prepared = replayer.prepare(
                Selection(request_ids=(recorded.ids["compliance"],)), live=True
            )
            with pytest.raises(AuditWriteError) as caught:
                replayer.run(prepared)
            assert isinstance(caught.value.__cause__, AuditStoreError)
    finally:
        lock.close()
        providers.close()
    assert len(fake_api.requests) == before  # fail closed: nothing went upstream
    assert replay_events(recorded.url, phase=None) == []
