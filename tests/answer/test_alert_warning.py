"""An answer alert reaches the library caller: a typed AnswerAlertWarning at the caller's own
line (sync, async, streamed), and the answer is still returned, with ``Result.alerts``
(`gateway ask`'s exit 1: tests/gateway/test_cli_ask.py)."""

from __future__ import annotations

import asyncio
import inspect
import warnings
from pathlib import Path

import pytest

from gateway import AnswerAlertWarning, AsyncGateway, Gateway
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import settings_for

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


def _here() -> int:
    """The line of this test file that called _here()."""
    caller = inspect.currentframe().f_back  # type: ignore[union-attr]
    assert caller is not None
    return caller.f_lineno


def _location(caught: pytest.WarningsRecorder) -> tuple[str, int]:
    (warning,) = [w for w in caught if isinstance(w.message, AnswerAlertWarning)]
    return warning.filename, warning.lineno


def test_the_warning_points_at_the_callers_line(gw: Gateway, fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.ok(model="claude-opus-4-6"))
    with pytest.warns(AnswerAlertWarning) as caught:
        line = _here() + 1
        gw.complete("compliance_review", PROMPT)
    assert _location(caught) == (__file__, line)


def test_a_streamed_answers_warning_points_at_the_callers_loop(
    gw: Gateway, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.stream("Approved.", model="claude-opus-4-6"))
    with pytest.warns(AnswerAlertWarning) as caught, gw.stream("compliance_review", PROMPT) as s:
        line = _here() + 1
        for _event in s:
            pass
    assert _location(caught) == (__file__, line)


def test_the_async_warning_is_raised_on_the_loop_at_the_callers_line(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    # Recorded in a worker thread (an answer with alerts makes several appends), which holds
    # none of the caller's frames: the warning is raised back on the loop.
    fake_api.script(Reply.ok(model="claude-opus-4-6"))

    async def run() -> tuple[tuple[str, int], int]:
        async with AsyncGateway(settings_for(policy_dir, db_path, fake_api.base_url)) as gw:
            with pytest.warns(AnswerAlertWarning) as caught:
                line = _here() + 1
                await gw.complete("compliance_review", PROMPT)
            return _location(caught), line

    location, line = asyncio.run(run())
    assert location == (__file__, line)
