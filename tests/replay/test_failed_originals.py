"""A live replay leaves out requests whose original call failed, and says how many: re-sending
them bills a call whose answer has nothing to compare with. --include-failed sends them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gateway import Gateway, UpstreamError
from gateway.cli import main
from gateway.replay import Outcome
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY, Recorded


@pytest.fixture
def failed_id(recorded: Recorded, fake_api: FakeMessagesAPI) -> str:
    fake_api.script(Reply.error(400))
    with (
        Gateway(policy_dir=recorded.policy_dir, database_url=recorded.url,
                anthropic_api_key=API_KEY, base_url=recorded.base_url, durability="os") as gw,
        pytest.raises(UpstreamError) as failed,
    ):  # fmt: skip
        gw.complete("quant_strategy", "Rates ideas", caller="desk")
    assert failed.value.request_id is not None
    return failed.value.request_id


def _replay(recorded: Recorded, *args: str) -> tuple[int, str]:
    env = {"GATEWAY_DATABASE_URL": recorded.url, "GATEWAY_POLICY_DIR": str(recorded.policy_dir),
           "GATEWAY_DURABILITY": "os", "ANTHROPIC_API_KEY": API_KEY,
           "ANTHROPIC_BASE_URL": recorded.base_url}  # fmt: skip
    out = CliRunner().invoke(main, ["replay", "--task", "quant_strategy", "--live", *args], env=env)
    return out.exit_code, out.stdout


def test_a_failed_original_is_left_out_and_counted_not_sent(
    recorded: Recorded, fake_api: FakeMessagesAPI, failed_id: str
) -> None:
    sent_before = len(fake_api.requests)
    fake_api.script(Reply.ok(text="Idea: momentum on FX majors."))
    code, out = _replay(recorded)
    assert code == 0, out
    assert len(fake_api.requests) == sent_before + 1  # the answered request only
    assert failed_id not in out
    assert "1 request(s) whose original call failed left out, not sent (use --include-failed)" in (
        out
    )


def test_include_failed_sends_it(
    recorded: Recorded, fake_api: FakeMessagesAPI, failed_id: str
) -> None:
    fake_api.script(Reply.ok(text="Idea: momentum on FX majors."), Reply.ok(text="Rates."))
    code, out = _replay(recorded, "--include-failed", "--format", "json")
    assert code == 0, out
    assert failed_id in out and '"failed_originals_left_out": 0' in out
    assert Outcome.DIFFERING.value in out
