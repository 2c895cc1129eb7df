"""An answer alert reaches the library caller: a typed AnswerAlertWarning, and the answer is
still returned, with ``Result.alerts`` (`gateway ask`'s exit 1: tests/gateway/test_cli_ask.py)."""

from __future__ import annotations

import warnings

import pytest

from gateway import AnswerAlertWarning, Gateway
from tests.fakes.messages_api import FakeMessagesAPI, Reply

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
