"""Decision-grade migration reports: a task whose policy declares a verdict gets a flip
matrix (recorded verdict x replayed verdict) at the top of the report, naming each flipped
pair; a flip never scores as more similar than a rewording that kept the verdict; a new
answer that breaks the task's schema is "invalid", as production would find it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gateway import Gateway
from gateway.cli import main
from gateway.replay import Outcome
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY, Recorded
from tests.replay.helpers import replay

PATTERN = r"<verdict>\s*(PASS|ESCALATE|BLOCK)\s*</verdict>"


def _answer(verdict: str, why: str = "No rule is breached by this payment.") -> Reply:
    return Reply.ok(text=f"<verdict>{verdict}</verdict>\n<reasons>{why}")


RECORDED = ["PASS", "PASS", "BLOCK", "ESCALATE", "PASS", "BLOCK"]
REPLAYED = [
    _answer("PASS"),
    _answer("BLOCK"),  # a flip whose wording is otherwise the same
    _answer("BLOCK"),
    _answer("PASS"),  # a flip
    _answer("PASS", "This payment breaches none of the firm's rules."),  # a rewording
    _answer("BLOCK"),
]


def _record(policy_dir: Path, url: str, fake_api: FakeMessagesAPI) -> list[str]:
    toml = policy_dir / "compliance_review.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text.replace("[output]\n", f"[output]\nverdict = '{PATTERN}'\n"), "utf-8")
    fake_api.script(*(_answer(v) for v in RECORDED))
    with Gateway(policy_dir=policy_dir, database_url=url, anthropic_api_key=API_KEY,
                 base_url=fake_api.base_url, durability="os") as gw:  # fmt: skip
        return [
            gw.complete("compliance_review", f"Pay {n} EUR to ACME.", caller="pay").request_id
            for n in range(len(RECORDED))
        ]


def test_a_flip_matrix_counts_each_verdict_pair_and_names_the_flips(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI
) -> None:
    ids = _record(policy_dir, sqlite_url, fake_api)
    fake_api.script(*REPLAYED)
    report = replay(sqlite_url, *ids, base_url=fake_api.base_url, live=True)
    rows = {r.request_id: r for r in report.requests}
    assert [rows[i].recorded_verdict for i in ids] == RECORDED
    assert [rows[i].replayed_verdict for i in ids] == ["PASS", "BLOCK", "BLOCK", "PASS", "PASS",
                                                       "BLOCK"]  # fmt: skip
    (task,) = report.by_task()
    cells = {(c.recorded, c.replayed): c for c in task.verdicts}
    assert {k: c.count for k, c in cells.items()} == {
        ("BLOCK", "BLOCK"): 2,
        ("ESCALATE", "PASS"): 1,
        ("PASS", "BLOCK"): 1,
        ("PASS", "PASS"): 2,
    }
    assert task.flips == 2
    assert cells[("PASS", "BLOCK")].request_ids == (ids[1],)
    assert cells[("ESCALATE", "PASS")].request_ids == (ids[3],)
    # The flip shares more characters with its original than the rewording does, and still
    # scores lower: a changed decision is never "more similar".
    flip, rewording = rows[ids[1]], rows[ids[4]]
    assert flip.similarity == 0.0 and "verdict flipped: PASS -> BLOCK" in (flip.reason or "")
    assert rewording.similarity is not None and rewording.similarity > flip.similarity


def test_the_flip_matrix_heads_the_text_and_html_reports(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    ids = _record(policy_dir, sqlite_url, fake_api)
    fake_api.script(*REPLAYED)
    env = {"GATEWAY_DATABASE_URL": sqlite_url, "GATEWAY_POLICY_DIR": str(policy_dir),
           "GATEWAY_DURABILITY": "os", "ANTHROPIC_API_KEY": API_KEY,
           "ANTHROPIC_BASE_URL": fake_api.base_url}  # fmt: skip
    html = tmp_path / "report.html"
    out = CliRunner().invoke(main, ["replay", *ids, "--live", "--report", str(html)], env=env)
    lines = out.stdout.splitlines()
    head = lines.index("task compliance_review: 2 of 6 answer pair(s) flipped their verdict:")
    first_row = next(n for n, x in enumerate(lines) if x.lstrip().startswith("seq "))
    assert head < first_row  # before any row
    assert f"  flipped PASS -> BLOCK: {ids[1]}" in lines
    page = html.read_text(encoding="utf-8")
    assert page.index("id='flips'") < page.index("id='requests'")
    assert f"<a href='#{ids[3]}'>{ids[3]}</a>" in page and f"id='{ids[3]}'" in page


def test_a_new_answer_that_breaks_the_schema_is_invalid(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(json_text='{"counterparty": "ACME", "amount": "lots"}'))
    report = replay(recorded.url, recorded.ids["json"], base_url=recorded.base_url, live=True)
    row = report.requests[0]
    assert row.outcome is Outcome.INVALID
    assert "fails the task's output check" in (row.reason or "")
    assert json.loads(report.summary.model_dump_json())["counts"]["invalid"] == 1
