"""What a live replay spent is in `audit usage`: each send's usage is recorded with its
REPLAY outcome, under the operator who ran it and the replayed task."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gateway.cli import main
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY, Recorded


def test_live_replay_spend_is_in_audit_usage(recorded: Recorded, fake_api: FakeMessagesAPI) -> None:
    env = {"GATEWAY_DATABASE_URL": recorded.url, "GATEWAY_POLICY_DIR": str(recorded.policy_dir),
           "GATEWAY_DURABILITY": "os", "ANTHROPIC_API_KEY": API_KEY,
           "ANTHROPIC_BASE_URL": recorded.base_url}  # fmt: skip
    usage = ["audit", "usage", "--by", "caller", "--format", "json"]
    before = json.loads(CliRunner().invoke(main, usage, env=env).stdout)
    assert "mrm.tester" not in {r["key"] for r in before["rows"]}
    fake_api.script(Reply.ok(text="Idea: momentum on FX majors."))
    done = CliRunner().invoke(
        main, ["replay", recorded.ids["quant"], "--live", "--operator", "mrm.tester"], env=env
    )
    assert done.exit_code == 0, done.output
    after = json.loads(CliRunner().invoke(main, usage, env=env).stdout)
    (row,) = [r for r in after["rows"] if r["key"] == "mrm.tester"]
    assert row["requests"] == 1 and row["input_tokens"] > 0 and row["output_tokens"] > 0
    assert after["total"]["requests"] == before["total"]["requests"] + 1
