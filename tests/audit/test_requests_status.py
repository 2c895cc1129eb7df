"""Every event kind that ends or makes up a request has a status in `audit list` (none is
shown as "incomplete", which means a process died between intent and outcome)."""

from __future__ import annotations

from audit import EventKind
from audit.reports.requests import OUTCOMES

NOT_AN_OUTCOME = {EventKind.REQUEST, EventKind.ATTEMPT_FAILED}


def test_every_kind_but_intent_and_attempt_has_a_status() -> None:
    assert set(EventKind) - set(OUTCOMES) == NOT_AN_OUTCOME
