"""The confirmation attack: after erasure, can someone holding the log confirm a guessed
low-entropy prompt? Not for the events this version writes: the request hash is an HMAC
under the deployment's cache key (never in the database) and each payload is sealed under
a random salt erased with it (docs/security.md, "What an erased request still reveals")."""

from __future__ import annotations

from audit import AuditStore
from audit.canonical import digest
from gateway import Gateway, Settings
from gateway.catalog import Catalog
from gateway.evidence import Erasing
from gateway.policy import Policy, plan_request


def test_a_guessed_one_word_prompt_cannot_be_confirmed_after_erasure(
    gw: Gateway, erasing: Erasing, settings: Settings
) -> None:
    answered = gw.complete("compliance_review", "yes")
    with AuditStore.open(settings.database_url) as store:
        [sent] = [e for e in store.events_for_request(answered.request_id) if e.kind == "request"]
        ref = sent.payload_digests["request_body"]
        wire = store.payload(ref)  # the exact bytes sent: the best guess an attacker can make
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
    # Even the exact wire bytes do not hash to the digest the signed event keeps.
    assert digest(wire) != ref
