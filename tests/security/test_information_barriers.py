"""Information barriers: under the default cache scope no caller is served, or learns of,
another caller's recorded answer (DESIGN.md §3 invariant 9, §7)."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import MakeGateway

PROMPT = "Transaction: pay 9,800 EUR to ACME Holdings before the earnings call"


def test_desk_b_is_not_served_desk_as_answer(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI
) -> None:
    gw = make_gateway()
    first = gw.complete("compliance_review", PROMPT, caller="desk-a")
    other = gw.complete("compliance_review", PROMPT, caller="desk-b")
    again = gw.complete("compliance_review", PROMPT, caller="desk-a")
    assert (first.cached, other.cached, again.cached) == (False, False, True)
    assert other.request_hash != first.request_hash  # nothing in desk b's record names a's
    assert len(fake_api.requests) == 2


def test_a_task_wide_scope_shares_and_review_warns(
    make_gateway: MakeGateway, fake_api: FakeMessagesAPI, policy_dir: Path
) -> None:
    path = policy_dir / "compliance_review.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('mode = "replay"', 'mode = "replay"\nscope = "task"'))
    gw = make_gateway()
    entry = gw._core.policies.entry("compliance_review")
    assert entry is not None
    assert "cache-shared-across-callers" in {f.rule for f in entry.findings}
    gw.complete("compliance_review", PROMPT, caller="desk-a")
    shared = gw.complete("compliance_review", PROMPT, caller="desk-b")
    assert shared.cached and len(fake_api.requests) == 1
