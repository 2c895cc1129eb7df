"""A live replay copies a request's content into its own events; erasure takes the copies too.

`gateway replay --live` (and `--model ID`, another model) re-sends the recorded prompt and
records what went on the wire and what came back as the payloads of REPLAY events under the
replay run's id. Those events name the replayed request (``original_request_id``) and its
data-subject tag, and an erasure of the request, by id, by subject or by retention, removes
them with it under the request's own erasure event: nothing of the prompt stays readable,
and verify reads the copies as erased by policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStore, EventKind
from audit.errors import AuditStoreError
from gateway import Gateway, Settings, UpstreamRejected
from gateway.catalog import Catalog
from gateway.evidence import Auditing, Erasing
from gateway.keys import cache_key, record_signer
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.registry import Providers
from gateway.replay import Replayer, Selection
from gateway.request import Recorder
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import API_KEY
from tests.retention.conftest import LATER

SECRET = "Transfer 7,777 GBP for client Ignatius Fairweather-Okonkwo"
SUBJECT = "customer-118204"


def replay_live(settings: Settings, base_url: str, request_id: str, model: str | None) -> str:
    """`gateway replay --live [--model]` of one request, as the gateway's deployment runs it
    (its record key signs the replay's events); the run id."""
    providers = Providers(
        Settings(),
        overrides={
            "anthropic": lambda _s: AnthropicProvider(
                api_key=API_KEY, base_url=base_url, max_attempts=1
            )
        },
    )
    signer = record_signer(settings, create=False)
    key = cache_key(settings, create=False)
    try:
        with AuditStore.open(settings.database_url, "os", signer=signer) as store:
            replayer = Replayer(
                store, Catalog.load(), providers, recorder=Recorder(store, cache_key=key)
            )
            selection = Selection(request_ids=(request_id,))
            prepared = replayer.prepare(selection, live=True, model=model)
            return replayer.run(prepared).summary.run_id
    finally:
        providers.close()


def leftovers(db_path: Path) -> list[str]:
    return [p.name for p in db_path.parent.glob("audit.db*") if SECRET.encode() in p.read_bytes()]


@pytest.mark.parametrize("how", ["request", "subject", "retention"])
@pytest.mark.parametrize("model", [None, "claude-opus-4-6"])
def test_erasing_a_replayed_request_erases_its_live_replay_copies(
    gw: Gateway,
    erasing: Erasing,
    settings: Settings,
    db_path: Path,
    fake_api: FakeMessagesAPI,
    how: str,
    model: str | None,
) -> None:
    original = gw.complete("compliance_review", SECRET, subject=SUBJECT)
    run_id = replay_live(settings, fake_api.base_url, original.request_id, model)
    with AuditStore.open(settings.database_url) as store:
        copies = [e for e in store.events_for_request(run_id) if e.kind is EventKind.REPLAY]
    [tag] = {e.data["subject"] for e in copies}  # the subject's keyed digest, not the id
    assert tag == erasing.subject_tag(SUBJECT) and SUBJECT not in str(copies[0].data)
    digests = {d for e in copies for d in e.payload_digests.values()}
    assert digests and leftovers(db_path)

    if how == "request":
        report = erasing.erase(
            [original.request_id], rule="subject_request", reason="DSAR", actor="j", approver="d"
        )
        seq = report.erased[original.request_id]
    elif how == "subject":
        report = erasing.erase_subject(SUBJECT, reason="DSAR", actor="j", approver="d")
        seq = report.erased[original.request_id]
    else:
        assert erasing.purge(actor="ops", now=LATER).requests_erased == 1
        seq = erasing.erasure_of(original.request_id).seq  # type: ignore[union-attr]

    assert leftovers(db_path) == []  # in none of the database files
    with AuditStore.open(settings.database_url) as store:
        erasure = store.event(seq)
        for digest in digests:
            with pytest.raises(AuditStoreError):
                store.payload(digest)
    assert erasure.request_id == original.request_id
    assert digests <= set(erasure.data["erased"])
    with Auditing.open(settings) as auditing:
        verified = auditing.verify()
    assert verified.ok, verified.defects
    assert [n.request_id for n in verified.erasures] == [original.request_id]


def test_an_upstream_message_quoting_the_prompt_goes_with_the_request(
    gw: Gateway,
    erasing: Erasing,
    settings: Settings,
    db_path: Path,
    fake_api: FakeMessagesAPI,
) -> None:
    """A refusal's own words may quote the prompt: the ATTEMPT_FAILED event keeps them as its
    payload (content), of the request, or of the request a live replay re-sent."""
    fake_api.script(Reply.error(400, message=f"cannot process: {SECRET}"))
    with pytest.raises(UpstreamRejected) as refused:
        gw.complete("compliance_review", SECRET, subject=SUBJECT)
    original = refused.value.request_id
    assert original is not None
    gw.complete("compliance_review", SECRET, subject=SUBJECT)  # answered: replayable
    answered = [r for r in requests_of(settings) if r != original]
    fake_api.script(Reply.error(400, message=f"still cannot: {SECRET}"))
    replay_live(settings, fake_api.base_url, answered[0], None)
    with AuditStore.open(settings.database_url) as store:
        quoted = [e for e in store.iter_events() if e.kind is EventKind.ATTEMPT_FAILED]
    assert len(quoted) == 2 and all(SECRET not in str(e.data) for e in quoted)
    assert leftovers(db_path)

    erasing.erase_subject(SUBJECT, reason="DSAR", actor="j", approver="d")
    assert leftovers(db_path) == []
    with Auditing.open(settings) as auditing:
        verified = auditing.verify()
    assert verified.ok, verified.defects


def requests_of(settings: Settings) -> list[str]:
    with AuditStore.open(settings.database_url) as store:
        return [e.request_id for e in store.iter_events() if e.kind is EventKind.REQUEST]
