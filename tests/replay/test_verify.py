"""--verify: re-plan under the recorded policy version, check hashes and payloads, offline."""

from __future__ import annotations

from pathlib import Path

from audit import AuditStore
from audit.verify import verify_log
from gateway.catalog import Catalog
from gateway.policy import Plan
from gateway.replay import Mode, Outcome
from gateway.replay._verify import _body_check, _same_json
from tests.replay.conftest import Recorded
from tests.replay.helpers import (
    RETIRED_OPUS_4_6,
    SONNET_4_6_NEW_API,
    override,
    replay,
    replay_events,
)


def test_every_recorded_request_verifies_and_the_cache_hit_is_skipped(recorded: Recorded) -> None:
    ids = recorded.ids
    report = replay(recorded.url, *ids.values())
    outcomes = {r.request_id: r.outcome for r in report.requests}
    for label in ("compliance", "quant", "json", "local"):
        assert outcomes[ids[label]] is Outcome.PASSED, label
    hit = next(r for r in report.requests if r.request_id == ids["hit"])
    assert hit.outcome is Outcome.SKIPPED
    assert ids["compliance"] in (hit.reason or "")
    checks = {c.name for c in report.requests[0].checks}
    assert {"policy", "replan", "request_hash", "wire_body", "sent_body"} <= checks
    assert report.summary.mode is Mode.VERIFY
    assert not report.any_failed


def test_each_replayed_request_is_recorded_as_a_replay_event(recorded: Recorded) -> None:
    report = replay(recorded.url, recorded.ids["compliance"], recorded.ids["quant"])
    events = replay_events(recorded.url)
    assert [e.data["original_request_id"] for e in events] == [
        recorded.ids["compliance"],
        recorded.ids["quant"],
    ]
    assert {e.request_id for e in events} == {report.summary.run_id}
    assert [e.seq for e in events] == [r.replay_seq for r in report.requests]
    assert all(e.data["mode"] == "verify" and e.data["outcome"] == "passed" for e in events)
    with AuditStore.open(recorded.url, "os") as store:
        assert verify_log(store).ok


def test_verify_uses_the_recorded_policy_after_the_file_is_edited(recorded: Recorded) -> None:
    prompt = recorded.policy_dir / "prompts" / "compliance_review.md"
    prompt.write_text("A completely different system prompt.\n", encoding="utf-8")
    toml = recorded.policy_dir / "compliance_review.toml"
    toml.write_text(toml.read_text().replace("max_tokens = 2048", "max_tokens = 1000"))
    report = replay(recorded.url, recorded.ids["compliance"])
    assert report.requests[0].outcome is Outcome.PASSED


def test_verify_works_after_the_policy_file_is_deleted(recorded: Recorded) -> None:
    (recorded.policy_dir / "quant_strategy.toml").unlink()
    report = replay(recorded.url, recorded.ids["quant"])
    assert report.requests[0].outcome is Outcome.PASSED


def test_a_model_retired_since_recording_still_verifies(recorded: Recorded, tmp_path: Path) -> None:
    catalog = Catalog.load(override(tmp_path, RETIRED_OPUS_4_6))
    report = replay(recorded.url, recorded.ids["quant"], catalog=catalog)
    assert report.requests[0].outcome is Outcome.PASSED


def test_verify_fails_when_the_request_no_longer_plans_to_the_recorded_hash(
    recorded: Recorded, tmp_path: Path
) -> None:
    catalog = Catalog.load(override(tmp_path, SONNET_4_6_NEW_API))
    report = replay(recorded.url, recorded.ids["compliance"], catalog=catalog)
    row = report.requests[0]
    assert row.outcome is Outcome.FAILED
    assert (row.reason or "").startswith("request_hash:")
    assert report.any_failed
    assert replay_events(recorded.url)[0].data["outcome"] == "failed"


def test_filters_select_requests_with_a_request_event(recorded: Recorded) -> None:
    report = replay(recorded.url, task="compliance_review")
    # the cache hit has no REQUEST event, so only the original is selected
    assert [r.request_id for r in report.requests] == [recorded.ids["compliance"]]


# -- bodies without an RFC 8785 form ----------------------------------------------------------


def test_two_bodies_that_cannot_be_canonicalised_do_not_pass_as_equal() -> None:
    plan = Plan.model_construct(body={"model": "claude-a", "temperature": float("nan")})
    check = _body_check(plan, {"model": "claude-b", "temperature": float("inf")})
    assert check.name == "wire_body" and not check.ok
    assert "re-planned body has no RFC 8785 form" in check.detail


def test_one_body_that_cannot_be_canonicalised_fails_the_check() -> None:
    plan = Plan.model_construct(body={"model": "claude-a"})
    check = _body_check(plan, {"model": "claude-a", "top_p": float("nan")})
    assert not check.ok and "recorded body has no RFC 8785 form" in check.detail


def test_sent_bodies_without_an_rfc_8785_form_compare_byte_for_byte() -> None:
    assert not _same_json(b'{"model": "a", "t": NaN}', b'{"model": "b", "t": NaN}')
    assert _same_json(b'{"model": "a", "t": NaN}', b'{"model": "a", "t": NaN}')
    assert _same_json(b'{"a": 1, "b": 2.0}', b'{"b":2,"a":1}')  # canonical form when it has one


def test_verify_fails_a_request_whose_recorded_body_was_altered(recorded: Recorded) -> None:
    # Someone with the file drops the append-only triggers and rewrites a stored payload.
    import sqlite3

    rid = recorded.ids["compliance"]
    with AuditStore.open(recorded.url, "os") as store:
        ref = store.events_for_request(rid)[0].payload_digests["request_body"]
    db = sqlite3.connect(recorded.url.removeprefix("sqlite:///"))
    triggers = [r[0] for r in db.execute("select name from sqlite_master where type='trigger'")]
    for name in triggers:
        db.execute(f'drop trigger "{name}"')
    # In Python: a sealed row (audit.sealing) starts with bytes SQL's text replace refuses.
    (stored,) = db.execute("select content from payloads where digest = ?", (ref,)).fetchone()
    altered = bytes(stored).replace(b"user", b"User")
    db.execute("update payloads set content = ? where digest = ?", (altered, ref))
    db.commit()
    db.close()
    report = replay(recorded.url, rid)
    [result] = report.requests
    assert result.outcome is Outcome.FAILED
    failed = {c.name for c in result.checks if not c.ok}
    assert "payload:request_body" in failed
