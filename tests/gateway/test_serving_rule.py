"""One serving rule for both sides of the replay cache: an answer the lookup would refuse from
the log is refused for the in-process memo too, and the other way round."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.request import Answered, Request
from tests.gateway.conftest import MakeGateway

PROMPT = "Transaction: EUR 4,100 to a long-standing supplier."


@pytest.mark.parametrize(
    "change",
    [{"ok": False}, {"alerts": [{"check": "model"}]}, {"sent_as_recorded": False}],
    ids=["not-ok", "alerted", "not-sent-as-recorded"],
)
def test_the_memo_and_the_log_refuse_the_same_answers(
    make_gateway: MakeGateway, change: dict[str, Any]
) -> None:
    gw = make_gateway()
    gw.complete("compliance_review", PROMPT)  # a replay policy: its answer is recorded
    core = gw._core
    prepared = core.pipeline.prepare(Request("compliance_review", prompt=PROMPT))
    (recorded,) = core.store.responses(prepared.request_hash)
    assert core.cache.serve(prepared, recorded) is not None

    data = {**recorded.data, **change}
    from_log = recorded.model_copy(update={"data": data})
    just_committed = Answered(recorded.request_id, recorded.seq, recorded.hash, data, {}, 0)
    assert core.cache.serve(prepared, from_log) is None
    assert core.cache.serve(prepared, just_committed) is None
