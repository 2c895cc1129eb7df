"""run_experiment on the local model and on Claude (the loopback fake): metrics, skips, audit."""

from __future__ import annotations

import json
import statistics

import pytest

from audit import AuditStore, EventKind
from gateway import Settings
from gateway.catalog import Catalog
from gateway.experiment import (
    DEFAULT_LOCAL_CONFIGS,
    MODEL_DEFAULT,
    SamplingConfig,
    run_experiment,
)
from gateway.policy import PolicySet
from tests.experiment.conftest import SHIPPED, all_events
from tests.fakes.messages_api import FakeMessagesAPI

PROMPTS = ["The reviewer reads the", "Payment held because"]
GREEDY = SamplingConfig(name="greedy", temperature=0.0)
HOT = SamplingConfig(name="hot", temperature=1.0, top_p=1.0)


def test_greedy_repeats_itself_and_high_temperature_is_more_diverse(settings: Settings) -> None:
    n = 6
    report = run_experiment(settings, "offline_demo", PROMPTS, n, [GREEDY, HOT])
    greedy = [r for r in report.rows if r.config == "greedy"]
    hot = [r for r in report.rows if r.config == "hot"]
    assert len(greedy) == len(hot) == len(PROMPTS)
    for row in greedy:
        assert row.unique_ratio == pytest.approx(1 / n)  # n identical samples
        assert row.samples == n and row.avg_length > 0
    assert statistics.mean(r.distinct_2 for r in hot) > statistics.mean(
        r.distinct_2 for r in greedy
    )
    assert statistics.mean(r.unique_ratio for r in hot) > 1 / n
    for row in report.rows:
        assert 0 <= row.distinct_1 <= 1 and 0 <= row.distinct_2 <= 1
        assert len(row.example) <= 60 and row.example


def test_every_sample_is_recorded_under_a_derived_policy(settings: Settings) -> None:
    n = 3
    report = run_experiment(settings, "offline_demo", PROMPTS, n, [GREEDY, HOT])
    events = all_events(settings.database_url)
    responses = [e for e in events if e.kind is EventKind.RESPONSE]
    requests = [e for e in events if e.kind is EventKind.REQUEST]
    assert len(responses) == len(requests) == 2 * len(PROMPTS) * n
    assert not [e for e in events if e.kind is EventKind.CACHE_HIT]
    recorded_ids = {e.request_id for e in responses}
    reported_ids = {rid for row in report.rows for rid in row.request_ids}
    assert recorded_ids == reported_ids
    for row in report.rows:
        seqs = {e.seq for e in responses if e.request_id in row.request_ids}
        assert (min(seqs), max(seqs)) == (row.first_seq, row.last_seq)

    reviewed = PolicySet.load(SHIPPED, Catalog.load()).get("offline_demo")
    fingerprints = {e.policy_fingerprint for e in requests}
    assert len(fingerprints) == 2 and reviewed.fingerprint not in fingerprints
    with AuditStore.open(settings.database_url, durability="os") as store:
        contents = [store.policy_content(fp) for fp in fingerprints if fp]
    temps = sorted(c["generation"]["temperature"] for c in contents if c)
    assert temps == [0.0, 1.0]
    for content in contents:
        assert content is not None
        assert content["cache_mode"] == "record" and content["reproducible"] is False
        assert content["generation"]["top_k"] is None  # exactly the config, not the policy's 40
        assert "sampling experiment" in content["description"]


def test_defaults_on_the_local_model_skip_only_what_review_refuses(settings: Settings) -> None:
    report = run_experiment(settings, "offline_demo", PROMPTS[:1], 1)
    ran = [r.config for r in report.rows]
    skipped = {s.config: s.reason for s in report.skipped}
    assert set(ran) | set(skipped) == {c.name for c in DEFAULT_LOCAL_CONFIGS}
    # The local model honours every default configuration, T 1.2 included.
    assert ran == [c.name for c in DEFAULT_LOCAL_CONFIGS]
    assert skipped == {}


def test_min_p_cannot_be_sent_through_a_policy_and_is_skipped(settings: Settings) -> None:
    config = SamplingConfig(name="minp", temperature=0.7, min_p=0.1)
    report = run_experiment(settings, "offline_demo", PROMPTS[:1], 1, [config, GREEDY])
    assert [r.config for r in report.rows] == ["greedy"]
    assert "min_p" in report.skipped[0].reason


def test_a_claude_model_that_honours_no_sampling_gets_only_the_default(
    claude_settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    n = 2
    report = run_experiment(claude_settings, "risk_report", PROMPTS[:1], n)
    assert report.model_id == "claude-opus-5-5"
    assert [r.config for r in report.rows] == [MODEL_DEFAULT.name]
    assert {s.config for s in report.skipped} == {c.name for c in DEFAULT_LOCAL_CONFIGS}
    assert all("defaults only" in s.reason for s in report.skipped)
    assert len(fake_api.requests) == n
    for request in fake_api.requests:
        body = json.loads(request.body)
        assert not {"temperature", "top_p", "top_k"} & set(body)


def test_a_claude_model_gets_only_the_configurations_it_honours(
    claude_settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    solo = SamplingConfig(name="solo", temperature=0.5)
    too_hot = SamplingConfig(name="too hot", temperature=1.2)
    configs = [*DEFAULT_LOCAL_CONFIGS, solo, too_hot]
    # compliance_review mandates temperature 0.0: "solo" changes it, so it must be asked for.
    report = run_experiment(
        claude_settings, "compliance_review", PROMPTS[:1], 2, configs, override_mandates=True
    )
    assert [r.config for r in report.rows] == ["greedy", "solo"]
    reasons = {s.config: s.reason for s in report.skipped}
    assert "never both" in reasons["T0.7 top_p0.95"]
    assert "outside the range" in reasons["too hot"]
    sent = [json.loads(r.body).get("temperature") for r in fake_api.requests]
    assert sent == [0.0, 0.0, 0.5, 0.5]
    # The fake answers the same text every time: no diversity, and the replay cache is off.
    assert report.rows[0].unique_ratio == pytest.approx(0.5)
