"""Every event kind that ends or makes up a request has a status in `audit list` (none is
shown as "incomplete", which means a process died between intent and outcome)."""

from __future__ import annotations

from audit import EventKind
from audit.verify import lifecycle
from gateway._vocabulary import STATUS_OF_KIND, TERMINAL

NOT_AN_OUTCOME = {EventKind.REQUEST, EventKind.ATTEMPT_FAILED}


def test_every_kind_but_intent_and_attempt_has_a_status() -> None:
    assert set(EventKind) - set(STATUS_OF_KIND) == NOT_AN_OUTCOME


def test_the_gateway_ends_a_request_at_the_kinds_verify_ends_its_life_at() -> None:
    assert {kind.value for kind in TERMINAL} == lifecycle.TERMINAL
