"""Replay selections on PostgreSQL: paged loading, experiments left out by the database (NULL
callers kept), payloads read a page at a time, and a streamed verify."""

from __future__ import annotations

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.store.migrate import upgrade
from gateway import Gateway
from gateway.catalog import Catalog
from gateway.experiment import EXPERIMENT_CALLER, SamplingConfig, derive_policy
from gateway.policy import Policy
from gateway.replay import Outcome, Replayer, RequestReplay, Selection
from gateway.replay._loading import load_selection
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import MakeGateway, db_path, make_gateway, policy_dir  # noqa: F401

pytestmark = pytest.mark.postgres

RECORD_KEY = "44" * 32


def test_a_verify_on_postgresql_pages_streams_and_leaves_experiments_out(
    make_gateway: MakeGateway,  # noqa: F811
    pg_url: str,
    fake_api: FakeMessagesAPI,
) -> None:
    upgrade(pg_url)
    gw = make_gateway(database_url=pg_url, record_key=RECORD_KEY)
    fake_api.script(*(Reply.ok(text=f"Verdict {i}.") for i in range(5)))
    ids = [
        gw.complete("compliance_review", f"Pay {i} EUR to ACME.", caller="payments-svc").request_id
        for i in range(3)
    ]

    # Only a gateway that derives its policies (as the experiment runner does) may record
    # under the reserved experiment caller.
    def derived(policy: Policy) -> Policy:
        return derive_policy(policy, SamplingConfig(name="sample"))

    with Gateway(gw.settings, policy_transform=derived) as runner:
        sample = runner.complete("compliance_review", "Pay 9 EUR.", caller=EXPERIMENT_CALLER)
    with AuditStore.open(pg_url) as store:
        # An event without a caller is not an experiment's: IS DISTINCT FROM keeps it.
        store.append(EventDraft(kind=EventKind.EXPORT, request_id="exp_1", data={}))
        assert store.count_requests(exclude_caller=EXPERIMENT_CALLER) == 4
        assert store.count_requests() == 5
        selected = load_selection(store, Selection(limit=None), page=2)
        assert [r.request_id for r in selected] == ids
        with_samples = load_selection(store, Selection(limit=None, include_experiments=True))
        assert [r.request_id for r in with_samples] == [*ids, sample.request_id]
        seen: list[RequestReplay] = []
        replayer = Replayer(store, Catalog.load())
        report = replayer.run(replayer.prepare(Selection(limit=None)), seen.append, keep_rows=False)
    assert [r.request_id for r in seen] == ids
    assert all(r.outcome is Outcome.PASSED for r in seen), [r.reason for r in seen]
    assert report.experiments_left_out == 1 and report.requests == ()
