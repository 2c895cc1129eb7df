"""Replay reports that support a decision: every report (text, JSON, HTML) says when it was
made, by whom, from which store (password masked) and with which gateway version, and names the
target model in its title; a --model report groups findings per task (one sentence and a
count); --fail-on-refused gates a migration. The HTML report and the experiment plot open in
headless Chromium (``GATEWAY_UPDATE_SCREENSHOTS=1`` refreshes the README's pictures)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway import Gateway, Settings
from gateway._keys import GATEWAY_VERSION
from gateway.cli import main
from gateway.replay import ReportContext
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY, Recorded
from tests.support.chromium import chromium, rendered_dom, screenshot

Cli = Callable[..., Result]
REPO = Path(__file__).resolve().parents[2]
TARGET = "claude-opus-5-5"  # defaults-only sampling: compliance_review's temperature is refused


@pytest.fixture
def three_compliance(recorded: Recorded, fake_api: FakeMessagesAPI) -> Recorded:
    """Two more compliance_review requests besides the recorded one."""
    fake_api.script(Reply.ok(text="Verdict: PASS."), Reply.ok(text="Verdict: ESCALATE."))
    with Gateway(
        policy_dir=recorded.policy_dir,
        database_url=recorded.url,
        anthropic_api_key=API_KEY,
        base_url=fake_api.base_url,
        durability="os",
    ) as gw:
        gw.complete("compliance_review", "Pay 20 EUR to ACME.", caller="pay")
        gw.complete("compliance_review", "Pay 9,900 EUR to ACME.", caller="pay")  # fmt: skip
    return recorded


def test_every_report_says_when_by_whom_from_where_and_which_version(
    cli: Cli, recorded: Recorded, tmp_path: Path
) -> None:
    html_path = tmp_path / "r.html"
    result = cli(recorded.ids["quant"], "--operator", "m.risk", "--report", str(html_path))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == "Replay report: verify: recorded on claude-opus-4-6"
    assert lines[2].startswith("made ") and " UTC by m.risk from sqlite:///" in lines[2]
    assert lines[2].endswith(f"compliance-gateway {GATEWAY_VERSION}")
    data = json.loads(cli(recorded.ids["quant"], "--operator", "m.risk", "--format",
                          "json").stdout)  # fmt: skip
    assert data["context"]["operator"] == "m.risk"
    assert data["context"]["store"] == recorded.url
    assert data["context"]["gateway_version"] == GATEWAY_VERSION
    assert data["title"] == "Replay report: verify: recorded on claude-opus-4-6"
    html = html_path.read_text(encoding="utf-8")
    assert "<title>Replay report: verify: recorded on claude-opus-4-6</title>" in html
    assert "by m.risk from sqlite:///" in html and f"compliance-gateway {GATEWAY_VERSION}" in html


def test_the_operator_defaults_to_the_login_name(cli: Cli, recorded: Recorded) -> None:
    import getpass

    line = cli(recorded.ids["quant"]).stdout.splitlines()[2]
    assert f" by {getpass.getuser()} from " in line


def test_the_store_is_named_with_its_password_masked() -> None:
    url = "postgresql+psycopg://app:s3cret@db/audit"
    context = ReportContext.made("m.risk", Settings(database_url=url).database_url_masked)
    assert "s3cret" not in context.line() and "app:***@db/audit" in context.line()


def test_a_migration_report_groups_findings_per_task_with_a_count(
    cli: Cli, three_compliance: Recorded, tmp_path: Path
) -> None:
    html_path = tmp_path / "m.html"
    result = cli("--task", "compliance_review", "--model", TARGET, "--report", str(html_path))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.splitlines()[1] == f"Replay report: model: migration to {TARGET}"
    assert "task compliance_review: 3 request(s): 3 refused" in out
    findings = [line for line in out.splitlines() if line.startswith("  finding (3 requests):")]
    assert findings and any("temperature" in line for line in findings)
    # Each sentence once, with its count; the rows no longer repeat it.
    assert out.count(findings[0].split(": ", 1)[1]) == 1
    assert "'identical' means the request" in out
    html = html_path.read_text(encoding="utf-8")
    assert f"<title>Replay report: model: migration to {TARGET}</title>" in html
    assert "id='tasks'" in html and "(3 requests)" in html
    data = json.loads(cli("--task", "compliance_review", "--model", TARGET,
                          "--format", "json").stdout)  # fmt: skip
    [task] = data["tasks"]
    assert task["counts"] == {"refused": 3}
    assert task["findings"][0]["count"] == 3


def test_fail_on_refused_gates_a_migration(cli: Cli, three_compliance: Recorded) -> None:
    gated = cli("--task", "compliance_review", "--model", TARGET, "--fail-on-refused")
    assert gated.exit_code == 1
    assert f"3 request(s) refused on {TARGET} (--fail-on-refused)" in gated.stderr
    passes = cli("--task", "offline_demo", "--model", "local:ngram-draft", "--fail-on-refused")
    assert passes.exit_code == 0, passes.output
    usage = cli("--task", "compliance_review", "--fail-on-refused")
    assert usage.exit_code == 2 and "--model" in usage.output


@pytest.mark.slow  # a browser
def test_the_migration_report_opens_in_headless_chromium(
    cli: Cli, three_compliance: Recorded, tmp_path: Path
) -> None:
    chromium()
    path = tmp_path / "replay-report.html"
    result = cli("--model", "claude-sonnet-4-6", "--operator", "m.risk",
                 "--report", str(path))  # fmt: skip
    assert result.exit_code == 0, result.output
    dom = rendered_dom(path)
    assert "migration to claude-sonnet-4-6" in dom and "m.risk" in dom
    screenshot(path, tmp_path / "replay-migration.png", "1100,900")


@pytest.mark.slow  # a browser
def test_the_live_migration_report_opens_in_headless_chromium(
    cli: Cli, three_compliance: Recorded, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The README's picture: answers side by side, with similarity, latency and cost."""
    chromium()
    fake_api.script(
        Reply.ok(text="Verdict: compliant.\nNo rule breached; rule 4 checked."),
        Reply.ok(text="Verdict: PASS."),
        Reply.ok(text="Verdict: ESCALATE.\nAmount at the reporting threshold."),
    )
    path = tmp_path / "replay-report.html"
    result = cli("--task", "compliance_review", "--model", "claude-opus-4-6", "--live",
                 "--operator", "m.risk", "--report", str(path))  # fmt: skip
    assert result.exit_code == 0, result.output
    dom = rendered_dom(path)
    assert "migration to claude-opus-4-6" in dom and "Answers side by side" in dom
    assert "unpriced" in dom and "3 answer pair(s) compared" in dom
    screenshot(path, tmp_path / "replay-report.png", "1100,1500")


@pytest.mark.slow  # a browser
def test_the_experiment_plot_opens_in_headless_chromium(tmp_path: Path) -> None:
    chromium()
    plot = tmp_path / "experiment-plot.png"
    env = {
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(REPO / "policies"),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DURABILITY": "os",
        "ANTHROPIC_API_KEY": "",
    }
    result = CliRunner().invoke(
        main,
        ["experiment", "--prompt", "The reviewer reads the", "--prompt", "Payment held because",
         "-n", "3", "--config", "g=0", "--config", "t=0.7", "--config", "w=1.2",
         "--plot", str(plot)],
        env=env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = tmp_path / "plot.html"
    page.write_text(
        "<!DOCTYPE html><html><body style='margin:0'>"
        f"<img src='{plot.name}' alt='experiment plot' style='width:100%'></body></html>"
    )
    screenshot(page, tmp_path / "experiment-plot-shot.png", "1000,400")
    if os.environ.get("GATEWAY_UPDATE_SCREENSHOTS"):
        shutil.copyfile(plot, REPO / "docs" / "images" / "experiment-plot.png")
        (REPO / "docs" / "images" / "experiment-plot-shot.png").unlink()


def test_the_header_states_the_selection_and_what_the_run_spent(
    cli: Cli, three_compliance: Recorded, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    fake_api.script(*(Reply.ok(text="Verdict: PASS.") for _ in range(3)))
    html_path = tmp_path / "live.html"
    result = cli("--task", "compliance_review", "--since", "2020-01-01", "--live", "--report",
                 str(html_path))  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[3] == (
        "selection: requests --task compliance_review --since 2020-01-01T00:00:00+00:00 "
        "the newest 50"
    )
    assert lines[4].startswith("spent: ") and lines[4].endswith("on 3 live call(s) answered")
    html = html_path.read_text(encoding="utf-8")
    assert "id='selection'>Selection: requests --task compliance_review" in html
    assert "id='spend'>spent: " in html
    data = json.loads(cli(three_compliance.ids["quant"], "--format", "json").stdout)
    assert data["context"]["selection"] == f"1 request id(s): {three_compliance.ids['quant']}"
