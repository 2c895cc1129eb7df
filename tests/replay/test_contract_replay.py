"""A request under an opened contract replays: verify re-plans the caller's parts (its
anthropic-beta values included) to the same key, and a live replay sends the beta values
again as the header, as the original did."""

from __future__ import annotations

from pathlib import Path

from gateway import Gateway, Settings
from gateway.replay import Outcome
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY
from tests.replay.helpers import replay

BETAS = ["claude-code-20250219", "interleaved-thinking-2025-05-14"]
MESSAGES = [{"role": "user", "content": "Run the tests."}]
OVERRIDES = {
    "system": [{"type": "text", "text": "You are a coding agent."}],
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    "thinking": {"type": "adaptive"},
    "max_tokens": 90_000,  # capped at 64,000
    "betas": BETAS,
}


def _record(policy_dir: Path, url: str, fake_api: FakeMessagesAPI) -> str:
    fake_api.script(Reply.ok(text="All green."))
    settings = Settings(
        policy_dir=policy_dir,
        database_url=url,
        anthropic_api_key=API_KEY,
        anthropic_base_url=fake_api.base_url,
        durability="os",
    )
    with (
        Gateway(settings) as gw,
        gw.stream("coding_agent", messages=MESSAGES, caller="dev", overrides=OVERRIDES) as stream,
    ):
        for _ in stream:
            pass
        request_id = stream.request_id
        assert stream.capped == {"max_tokens": 64000}
    assert fake_api.requests[-1].headers["anthropic-beta"] == ",".join(BETAS)
    return request_id


def test_verify_re_plans_the_callers_parts_to_the_recorded_key(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    request_id = _record(policy_dir, sqlite_url, fake_api)
    (row,) = replay(sqlite_url, request_id).requests
    assert row.outcome is Outcome.PASSED, row.reason
    assert {c.name for c in row.checks} >= {"request_hash", "wire_body"}


def test_a_live_replay_sends_the_recorded_beta_values_again(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    request_id = _record(policy_dir, sqlite_url, fake_api)
    fake_api.script(Reply.ok(text="All green."))
    replay(sqlite_url, request_id, base_url=fake_api.base_url, live=True)
    original, again = fake_api.requests[-2:]
    assert again.headers["anthropic-beta"] == ",".join(BETAS)
    assert again.body == original.body
