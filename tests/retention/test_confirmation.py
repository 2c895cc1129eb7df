"""The confirmation attack: after erasure, can someone holding the log confirm a guessed
low-entropy prompt? For the events this version writes, yes: documented, pinned here."""

from __future__ import annotations

import pytest

from audit import AuditStore
from gateway import Gateway, Settings
from gateway.catalog import Catalog
from gateway.evidence import Erasing
from gateway.policy import Policy, plan_request


@pytest.mark.xfail(
    strict=True,
    reason="the REQUEST's request_hash (the replay key) and payload digests are plain sha256 "
    "of the wire body: keyed digests for new events are not built yet (docs/security.md, "
    "'What an erased request still reveals'). This test passes once they are.",
)
def test_a_guessed_one_word_prompt_cannot_be_confirmed_after_erasure(
    gw: Gateway, erasing: Erasing, settings: Settings
) -> None:
    answered = gw.complete("compliance_review", "yes")
    erasing.erase(
        [answered.request_id], rule="subject_request", reason="DSAR", actor="j", approver="dpo"
    )
    with AuditStore.open(settings.database_url) as store:
        [request] = [
            e for e in store.events_for_request(answered.request_id) if e.kind == "request"
        ]
        content = store.policy_content(request.policy_fingerprint or "")
    assert content is not None
    policy = Policy.from_content(content)
    model = Catalog.load().get(policy.model.id)
    confirmed = [
        guess
        for guess in ("no", "yes", "maybe")
        if plan_request(
            policy, model, [{"role": "user", "content": guess}], caller=request.caller
        ).request_hash
        == request.request_hash
    ]
    assert confirmed == []
