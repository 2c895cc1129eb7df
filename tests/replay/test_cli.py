"""`gateway replay` through click: formats, exit codes, bad input recording nothing, HTML."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import Result

from audit import AuditStore, EventDraft, EventKind
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import Recorded
from tests.replay.helpers import head, replay_events
from tests.support.chromium import chromium, rendered_dom

Cli = Callable[..., Result]
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def test_verify_is_the_default_and_prints_a_summary_and_rows(cli: Cli, recorded: Recorded) -> None:
    result = cli(recorded.ids["compliance"], recorded.ids["hit"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("verify: 2 request(s): 0 identical, 0 differing, 0 failed,")
    assert "1 skipped" in result.stdout and "1 passed" in result.stdout
    assert recorded.ids["compliance"] in result.stdout


def test_json_and_jsonl_formats(cli: Cli, recorded: Recorded) -> None:
    data = json.loads(cli("--task", "quant_strategy", "--format", "json").stdout)
    assert data["summary"]["counts"]["passed"] == 1
    assert data["requests"][0]["request_id"] == recorded.ids["quant"]
    lines = cli("--limit", "2", "--format", "jsonl").stdout.splitlines()
    assert json.loads(lines[0])["summary"]["total"] == 2
    assert len(lines) == 3


def test_a_verify_failure_exits_1(
    cli: Cli, recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.replay.helpers import SONNET_4_6_NEW_API, override

    monkeypatch.setenv("GATEWAY_CATALOG_OVERRIDE", str(override(tmp_path, SONNET_4_6_NEW_API)))
    result = cli(recorded.ids["compliance"])
    assert result.exit_code == 1
    assert "request_hash:" in result.stdout


def test_a_failed_live_call_exits_3(
    cli: Cli, recorded: Recorded, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.error(400))
    result = cli("--live", recorded.ids["quant"])
    assert result.exit_code == 3
    assert "failed" in result.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("req_does_not_exist",), "no recorded request has id 'req_does_not_exist'"),
        (
            ("--model", "claude-nonexistent-9", "--task", "quant_strategy"),
            "not in the model catalog",
        ),
        (("--verify", "--live"), "cannot be combined"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_records_nothing(
    cli: Cli, recorded: Recorded, args: tuple[str, ...], says: str
) -> None:
    before = head(recorded.url)
    result = cli(*args)
    assert result.exit_code == 2
    assert says in result.stderr
    assert "Traceback" not in result.output
    assert head(recorded.url) == before


def test_a_database_without_the_recorded_policy_version_is_bad_input(
    cli: Cli, recorded: Recorded
) -> None:
    with AuditStore.open(recorded.url, "os") as store:
        store.append(
            EventDraft(
                kind=EventKind.REQUEST,
                request_id="req_orphan",
                task="compliance_review",
                policy_fingerprint="sha256:" + "0" * 64,
                request_hash="sha256:" + "1" * 64,
                data={"model_id": "claude-sonnet-4-6"},
            )
        )
    before = head(recorded.url)
    result = cli(recorded.ids["compliance"], "req_orphan")
    assert result.exit_code == 2
    assert "policy version sha256:000" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert head(recorded.url) == before
    assert replay_events(recorded.url) == []


class _Strict(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def _hostile_report(cli: Cli, recorded: Recorded, fake_api: FakeMessagesAPI, path: Path) -> str:
    fake_api.script(Reply.ok(text=HOSTILE))
    result = cli("--live", recorded.ids["quant"], "--report", str(path))
    assert result.exit_code == 0, result.output
    return path.read_text(encoding="utf-8")


def test_the_html_report_escapes_the_answer(
    cli: Cli, recorded: Recorded, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    html = _hostile_report(cli, recorded, fake_api, tmp_path / "r.html")
    parser = _Strict()
    parser.feed(html)
    assert "script" not in parser.tags and "img" not in parser.tags
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert html.index("id='summary'") < html.index(f"<section id='{recorded.ids['quant']}'")


@pytest.mark.slow  # a browser
def test_the_html_report_opens_in_headless_chromium(
    cli: Cli, recorded: Recorded, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    chromium()  # skips, saying why, when it is not installed
    path = tmp_path / "r.html"
    _hostile_report(cli, recorded, fake_api, path)
    dom = rendered_dom(path)
    assert "Replay report: live" in dom
    assert "<script>" not in dom
