"""Invariant 12: nothing that fails authentication steers the read path (issue 26, item 2).

The serving rule authenticates a candidate before it reads its ok, alerts and "sent as
recorded" (tests/security/test_serving_rule_authenticates_first.py). The other row the read
path reads before it serves is the request's life: an earlier terminal outcome makes the
candidate a second outcome. An insider who appends an unsigned outcome for a request while
its upstream call runs made the genuine answer that followed look like the forgery: the alert
blamed the genuine row and the forged one was taken as the request's end. Now that row is
authenticated first, and the alert names it as the row that does not check out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStore, EventDraft, EventKind, StoredEvent
from audit.store.signing import Signer
from gateway import IntegrityAlert
from tests.audit.conftest import Raw
from tests.gateway.conftest import MakeGateway
from tests.security.test_record_signatures import forge_after_head

QUESTION = "Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."
RECORD = Signer.from_text("9d" * 32)


def _clone(event_kind: EventKind, template: StoredEvent, request_id: str) -> EventDraft:
    return EventDraft(
        kind=event_kind,
        request_id=request_id,
        task=template.task,
        caller=template.caller,
        request_hash=template.request_hash,
        data=template.data,
    )


def test_a_forged_outcome_inside_a_life_is_named_not_taken_as_its_end(
    make_gateway: MakeGateway, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/audit.db"
    record = make_gateway(offline=True, database_url=url, record_key=RECORD.seed_hex())
    first = record.complete("compliance_review", QUESTION, caller="desk")
    with AuditStore.open(url, "os", signer=RECORD, create=False) as store:
        request, response = store.events_for_request(first.request_id)
        payloads = {name: store.payload(ref) for name, ref in response.payload_digests.items()}
        # A second life of the same request hash: its intent, then (below) its answer.
        store.append(_clone(EventKind.REQUEST, request, "req_in_flight"))
    raw = Raw(url)
    try:
        raw.unguard()
        forged = forge_after_head(raw, url, response.seq, request_id="req_in_flight")
    finally:
        raw.close()
    with AuditStore.open(url, "os", signer=RECORD, create=False) as store:
        answer = _clone(EventKind.RESPONSE, response, "req_in_flight")
        store.append(answer.model_copy(update={"payloads": payloads}))

    with pytest.raises(IntegrityAlert) as alert:
        make_gateway(offline=True, database_url=url, record_key=RECORD.seed_hex()).complete(
            "compliance_review", QUESTION, caller="desk"
        )
    problems = alert.value.problems
    assert any(p.startswith(f"seq {forged}: ") and "signature" in p for p in problems), problems
    assert not any("second outcome" in p for p in problems), problems
