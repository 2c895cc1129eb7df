"""`replay --live` shows the recorded answer beside the new one, so it is shown only once its
record checks out (the read path's rule): a forged answer planted after the real one is named,
never displayed as what the model said."""

from __future__ import annotations

from pathlib import Path

from gateway.replay import Outcome
from tests.audit.conftest import Raw
from tests.gateway.conftest import MakeGateway
from tests.replay.helpers import replay
from tests.security.test_record_signatures import (
    FORGED_TEXT,
    QUESTION,
    _response_seq,
    forge_after_head,
)


def test_a_forged_recorded_answer_is_not_shown_side_by_side(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    url = f"sqlite:///{db_path}"
    first = make_gateway(offline=True).complete("compliance_review", QUESTION, caller="desk")
    raw = Raw(url)
    try:
        raw.unguard()  # whoever has the file can drop the triggers
        forge_after_head(raw, url, _response_seq(url, first.request_id), text=first.text)
    finally:
        raw.close()
    report = replay(url, first.request_id, live=True)
    (row,) = report.requests
    assert row.outcome is Outcome.FAILED
    assert row.reason is not None and "did not check out" in row.reason
    assert row.recorded_answer is None
    assert FORGED_TEXT not in (row.text_diff or "")
