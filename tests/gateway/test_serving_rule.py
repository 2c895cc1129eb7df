"""One serving rule for both sides of the replay cache: an answer the lookup would refuse from
the log is refused for the in-process memo too, and the other way round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.store.signing import Signer
from gateway.keys import RECORD_KEY_FILE
from gateway.request import Answered, Request
from gateway.request._served import MAX_CANDIDATES
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


def test_a_lookup_reads_a_bounded_number_of_recorded_answers(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    """Each candidate is authenticated before it is judged, so a request hash with thousands
    of failed answers on the record would cost a check of each. The lookup reads the newest
    MAX_CANDIDATES; an ok answer older than that many failed ones is not reached, and the
    request goes upstream and records anew, as one with no answer on the record does."""
    first = make_gateway(offline=True).complete("compliance_review", PROMPT)
    url = f"sqlite:///{db_path}"
    signer = Signer.from_file(db_path.parent / RECORD_KEY_FILE)
    with AuditStore.open(url, "os", signer=signer, create=False) as store:
        request, response = store.events_for_request(first.request_id)
        payloads = {
            e.kind: {name: store.payload(ref) for name, ref in e.payload_digests.items()}
            for e in (request, response)
        }
        failed = {**response.data, "ok": False}
        for n in range(MAX_CANDIDATES):
            store.append_many(
                [
                    EventDraft(
                        kind=e.kind,
                        request_id=f"req_failed_{n}",
                        task=e.task,
                        caller=e.caller,
                        request_hash=e.request_hash,
                        data=failed if e.kind == EventKind.RESPONSE else e.data,
                        payloads=payloads[e.kind],
                    )
                    for e in (request, response)
                ]
            )
    again = make_gateway(offline=True).complete("compliance_review", PROMPT)
    assert not again.cached
    assert make_gateway(offline=True).complete("compliance_review", PROMPT).cached
