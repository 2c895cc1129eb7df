"""An answer alert reaches the caller: the library raises a typed AnswerAlertWarning (the
answer is still returned, with ``Result.alerts``), and `gateway ask` prints the answer, says
the alert in one line and exits 1, so a script cannot take it for an ordinary answer."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway import AnswerAlertWarning, Gateway
from gateway.cli import main
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import API_KEY

PROMPT = "Transaction: EUR 9,900 from Jane Roe to ACME Shipping Ltd."


def test_the_library_caller_gets_a_typed_warning_and_the_answer(
    gw: Gateway, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text="Approved.", model="claude-opus-4-6"))
    with pytest.warns(AnswerAlertWarning) as caught:
        result = gw.complete("compliance_review", PROMPT)
    assert result.text == "Approved." and result.alerts == ("model",)
    (warning,) = [w.message for w in caught if isinstance(w.message, AnswerAlertWarning)]
    assert warning.checks == ("model",) and warning.request_id == result.request_id
    assert warning.seq == result.seq


def test_a_matching_answer_warns_nothing(gw: Gateway) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AnswerAlertWarning)
        result = gw.complete("compliance_review", PROMPT)
    assert result.alerts == ()


def test_ask_exits_1_on_an_answer_alert(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    env = {
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DATABASE_URL": f"sqlite:///{db_path}",
        "GATEWAY_DURABILITY": "os",
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake_api.base_url,
    }
    fake_api.script(Reply.ok(text="Approved.", model="claude-opus-4-6"))
    out = CliRunner().invoke(main, ["ask", "compliance_review", PROMPT], env=env)
    assert out.exit_code == 1
    assert out.stdout == "Approved.\n"  # the answer is printed all the same
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("answer alert")]
    assert "(model)" in line and "gateway audit show req_" in line
    assert "Warning" not in out.stderr  # said once, in words, not as a Python warning
    fake_api.script(Reply.ok(text="Approved.", model="claude-opus-4-6"))
    as_json = CliRunner().invoke(main, ["ask", "compliance_review", "x", "--format", "json"],
                                 env=env)  # fmt: skip
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["alerts"] == ["model"]
    ok = CliRunner().invoke(main, ["ask", "compliance_review", "y"], env=env)
    assert ok.exit_code == 0, ok.output
