"""Replay reads a REQUEST's caller parts back from its request body when the event names them
there (``requested_in_body``), and from ``requested`` when it holds them (every REQUEST
recorded before): both re-plan to the recorded key and body, and a live replay sends the
same bytes again."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from audit import AuditStore
from gateway import Gateway, Settings
from gateway.policy import IN_BODY
from gateway.replay import Outcome
from gateway.request import Intended, Request
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY
from tests.replay.helpers import replay

USER = [{"role": "user", "content": "Momentum on FX majors"}]
OVERRIDES = {
    "system": "Sign as the desk bot.",
    "tools": [
        {"name": f"desk_tool_{n}", "input_schema": {"type": "object", "properties": {}}}
        for n in range(3)
    ],
    "max_tokens": 20_000,  # capped at 16,000
}


def _settings(policy_dir: Path, url: str, fake_api: FakeMessagesAPI) -> Settings:
    return Settings(
        policy_dir=policy_dir,
        database_url=url,
        anthropic_api_key=API_KEY,
        anthropic_base_url=fake_api.base_url,
        durability="os",
    )


def test_verify_and_live_replay_read_the_parts_from_the_request_body(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text="ok"), Reply.ok(text="ok"))
    with Gateway(_settings(policy_dir, sqlite_url, fake_api)) as gw:
        request_id = gw.complete(
            "general_assistant", messages=USER, caller="desk", overrides=OVERRIDES
        ).request_id
    (row,) = replay(sqlite_url, request_id).requests
    assert row.outcome is Outcome.PASSED, row.reason
    assert {c.name for c in row.checks} >= {"request_hash", "wire_body"}
    replay(sqlite_url, request_id, base_url=fake_api.base_url, live=True)
    original, again = fake_api.requests[-2:]
    assert again.body == original.body


def test_a_request_recorded_with_every_override_inline_still_verifies(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    # The REQUEST as it was written before requested_in_body: every override in requested.
    fake_api.script(Reply.ok(text="ok"))
    with Gateway(_settings(policy_dir, sqlite_url, fake_api)) as gw:
        core = gw._core
        request = Request("general_assistant", messages=USER, caller="desk", overrides=OVERRIDES)
        prepared = core.pipeline.prepare(request)
        intent = core.pipeline.records.intent(prepared)
        assert IN_BODY in intent.data  # what this version writes
        inline = {k: v for k, v in intent.data.items() if k != IN_BODY}
        inline["requested"] = OVERRIDES
        sent = core.recorder.call(
            prepared.labels,
            core.provider(prepared),
            prepared.body,
            api_version=prepared.plan.api_version,
            intended=Intended(replace(intent, data=inline)),
        )
        core.finish(prepared, sent)
    (row,) = replay(sqlite_url, prepared.request_id).requests
    assert row.outcome is Outcome.PASSED, row.reason
    assert {c.name for c in row.checks} >= {"request_hash", "wire_body"}


def test_a_migration_whose_caller_parts_are_unreadable_is_skipped(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    """The ``overrides`` payload gone (a file edited behind the gateway's back) while the body
    is there: re-planned without the caller's parts, the request would show changes it never
    had. The row says the parts are not readable instead."""
    blocks = [{"type": "text", "text": "Sign as the desk bot."}]  # combined: in the payload
    fake_api.script(Reply.ok(text="ok"))
    with Gateway(_settings(policy_dir, sqlite_url, fake_api)) as gw:
        request_id = gw.complete(
            "general_assistant", messages=USER, caller="desk", overrides={"system": blocks}
        ).request_id
    with AuditStore.open(sqlite_url, "os") as store:
        [request] = [e for e in store.events_for_request(request_id) if e.kind == "request"]
    ref = request.payload_digests["overrides"]
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
        for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'payloads'"
        ).fetchall():
            db.execute(f'DROP TRIGGER "{name}"')
        db.execute("DELETE FROM payloads WHERE digest = ?", (ref,))
    (row,) = replay(sqlite_url, request_id, model="claude-opus-4-6").requests
    assert row.outcome is Outcome.SKIPPED
    assert "overrides" in (row.reason or "")
