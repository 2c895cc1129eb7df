"""`replay --model M --live` (and --live) show both answers side by side: the text (escaped,
cut with a visible mark), a similarity figure, latency and estimated cost of each, and
per-task totals, in the table, JSON and HTML."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import Result

from audit import AuditStore
from gateway.catalog import Catalog
from gateway.replay import Outcome, render_html
from gateway.replay._answers import TEXT_LIMIT
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import Recorded
from tests.replay.helpers import replay

Cli = Callable[..., Result]
TARGET = "claude-opus-4-6"  # honours compliance_review's temperature: a live migration
PRICES = {"price_input": 5.0, "price_output": 25.0, "price_cache_write": 6.25,
          "price_cache_read": 0.5}  # fmt: skip
NEW_ANSWER = "Verdict: compliant.\nRule 4 checked."
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def _priced_target(tmp_path: Path) -> Path:
    """A catalog override that prices the target only (no Claude model is priced shipped)."""
    shipped = Catalog.load().get(TARGET)
    assert shipped is not None
    entry = shipped.model_dump(
        mode="json", exclude={"id", "sources", "retires_at", "transports"}, exclude_none=True
    )
    lines = [f"{k} = {json.dumps(v)}" for k, v in {**entry, **PRICES}.items()]
    sources = ", ".join(f'{f} = "a price sheet read on 2026-12-01"' for f in PRICES)
    override = tmp_path / "prices.toml"
    override.write_text(
        f'schema = 1\n[models."{TARGET}"]\n' + "\n".join(lines)
        + f"\nsources = {{ {sources} }}\n"
    )  # fmt: skip
    return override


def _recorded_latency(url: str, request_id: str) -> float:
    with AuditStore.open(url, "os") as store:
        (response,) = [
            e for e in store.events_for_request(request_id) if e.kind.value == "response"
        ]
    return float(response.data["latency_ms"])


def test_a_live_migration_shows_both_answers_latency_and_cost(
    recorded: Recorded, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    fake_api.script(Reply.ok(text=NEW_ANSWER))
    catalog = Catalog.load(_priced_target(tmp_path))
    report = replay(
        recorded.url,
        recorded.ids["compliance"],
        base_url=recorded.base_url,
        live=True,
        model=TARGET,
        catalog=catalog,
    )
    (row,) = report.requests
    assert row.outcome is Outcome.DIFFERING
    old, new = row.recorded_answer, row.replayed_answer
    assert old is not None and new is not None
    assert old.text == "Verdict: compliant.\nNo rule breached." and new.text == NEW_ANSWER
    assert old.truncated_chars == new.truncated_chars == 0
    assert old.latency_ms == _recorded_latency(recorded.url, recorded.ids["compliance"])
    assert new.latency_ms is not None and new.latency_ms > 0
    # The recorded model has no sourced price: unpriced, never 0; the target is priced.
    assert old.model == "claude-sonnet-4-6" and old.cost_usd is None
    assert old.cost_text == "unpriced"
    assert new.model == TARGET and new.input_tokens and new.output_tokens
    expected = (new.input_tokens * 5.0 + new.output_tokens * 25.0) / 1_000_000
    assert new.cost_usd == pytest.approx(expected) and new.priced
    assert row.similarity is not None and 0 < row.similarity < 1
    (task,) = report.by_task()
    assert task.live is not None and task.live.compared == 1
    assert task.live.recorded.cost_usd is None and task.live.recorded.unpriced == 1
    assert task.live.replayed.cost_usd == pytest.approx(expected)
    assert task.live.mean_similarity == row.similarity


def test_a_long_answer_is_cut_with_a_visible_mark(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    long = "word " * 1000  # 5,000 characters
    fake_api.script(Reply.ok(text=long))
    report = replay(recorded.url, recorded.ids["compliance"], base_url=recorded.base_url, live=True)
    new = report.requests[0].replayed_answer
    assert new is not None and new.length == len(long)
    assert new.truncated_chars == len(long) - TEXT_LIMIT
    assert new.text.endswith(f"… [truncated: {len(long) - TEXT_LIMIT:,} more characters]")
    assert new.excerpt(10) == long[:10] + f"… [truncated: {len(long) - 10:,} more characters]"
    html = render_html(report)
    assert f"truncated: {len(long) - TEXT_LIMIT:,} more characters not shown" in html


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(tag)


def test_the_side_by_side_html_escapes_both_answers(
    recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text=HOSTILE))
    report = replay(
        recorded.url,
        recorded.ids["compliance"],
        base_url=recorded.base_url,
        live=True,
        model=TARGET,
    )
    html = render_html(report)
    assert "Answers side by side" in html and "class='answers'" in html
    assert HOSTILE not in html and "&lt;script&gt;" in html
    parser = _Scripts()
    parser.feed(html)
    assert "script" not in parser.elements and "img" not in parser.elements
    assert "difflib" in html and "unpriced" in html


def test_table_and_json_carry_both_answers_and_task_totals(
    cli: Cli, recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text=NEW_ANSWER), Reply.ok(text=NEW_ANSWER))
    table = cli("--model", TARGET, "--live", recorded.ids["compliance"])
    assert table.exit_code == 0, table.output
    out = table.stdout
    assert "recorded (claude-sonnet-4-6, " in out and f"replayed ({TARGET}, " in out
    assert "unpriced): Verdict: compliant.\\x0aNo rule breached." in out  # escaped, one line
    assert "answers: 1 answer pair(s), mean similarity" in out
    assert "similarity is difflib's SequenceMatcher ratio" in out
    data = json.loads(
        cli("--model", TARGET, "--live", recorded.ids["compliance"], "--format", "json").stdout
    )
    (row,) = data["requests"]
    assert row["replayed_answer"]["text"] == NEW_ANSWER
    assert row["recorded_answer"]["cost_usd"] is None
    assert row["recorded_answer"]["priced"] is False
    (task,) = data["tasks"]
    assert task["live"]["compared"] == 1 and task["live"]["recorded"]["unpriced"] == 1


def test_a_plain_live_replay_shows_them_too(
    cli: Cli, recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text=NEW_ANSWER))
    out = cli("--live", recorded.ids["quant"]).stdout
    assert "recorded (claude-" in out and "replayed (claude-" in out
    assert "task quant_strategy: 1 answer pair(s)" in out
