"""`gateway evidence REGIME`: a pack built from a log the real gateway wrote (against the
loopback fake) holds its summary, JSON, export, checkpoint, receipts, keys and verifier; it
is recorded as an event; its export verifies with the standalone verifier alone; and its
page, opened in headless Chromium, shows every section."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventKind
from gateway import Gateway, Settings
from gateway.cli import main
from gateway.packs import REGIMES
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.support.chromium import rendered_dom, screenshot
from tests.support.standalone import run_standalone

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT_KEY = "11" * 32
SECTIONS = ("verdict", "asks", "items", "counts", "files")


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A log of five compliance reviews, one of them refused by the model's output check."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with FakeMessagesAPI() as fake:
        fake.script(*[Reply.ok(text=f"Verdict: compliant.\nNo rule breached ({n}).")
                      for n in range(5)])  # fmt: skip
        settings = Settings(
            policy_dir=ROOT / "policies",
            database_url=url,
            anthropic_api_key="sk-ant-test",
            anthropic_base_url=fake.base_url,
        )
        with Gateway(settings) as gw:
            for n in range(5):
                gw.complete("compliance_review", f"Pay {n} EUR to ACME.", caller="desk-1")
    return url


def run(url: str, *args: str) -> Result:
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY}
    return CliRunner().invoke(main, list(args), env=env)


def build(url: str, regime: str, out: Path, *more: str) -> Result:
    today = datetime.now(UTC).date().isoformat()
    return run(url, "evidence", regime, "--from", today, "--to", today, "-o", str(out),
               "--reviewer", "a.auditor", *more)  # fmt: skip


@pytest.mark.parametrize("regime", list(REGIMES))
def test_a_pack_holds_its_evidence_passes_on_an_intact_log_and_is_recorded(
    url: str, tmp_path: Path, regime: str
) -> None:
    out = tmp_path / "pack"
    built = build(url, regime, out, "--format", "json")
    summary = json.loads(built.stdout)
    statuses = {i["key"]: i["status"] for i in summary["items"]}
    assert "fail" not in statuses.values(), summary["items"]
    assert built.exit_code == 0, built.output
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"index.html", "summary.json", "export.jsonl", "checkpoint.json",
            "public-keys.json", "verify_evidence.py"} <= names  # fmt: skip
    assert sum(n.startswith("receipts/") for n in names) == 3
    assert json.loads((out / "summary.json").read_text()) == summary
    with AuditStore.open(url) as store:
        [event] = store.iter_events(kind=EventKind.EVIDENCE_PACK)
        assert event.seq == summary["recorded_seq"] and event.caller == "a.auditor"
        assert event.data["regime"] == regime and event.data["items"] == statuses
        assert event.data["files"]["export.jsonl"] == summary["files"]["export.jsonl"]["sha256"]
    page = (out / "index.html").read_text()
    assert all(f'id="{s}"' in page for s in SECTIONS)
    assert all(source in page for source in REGIMES[regime].sources)


def test_the_pack_fails_an_item_the_log_fails(url: str, tmp_path: Path) -> None:
    """Without a checkpoint key there is no signed head: that item fails, exit 1, and the
    pack is still written (a failing pack is evidence too)."""
    today = datetime.now(UTC).date().isoformat()
    out = tmp_path / "pack"
    built = CliRunner().invoke(main, ["evidence", "dora", "--from", today, "--to", today,
                                      "-o", str(out), "--reviewer", "a.auditor"],
                               env={"GATEWAY_DATABASE_URL": url})  # fmt: skip
    assert built.exit_code == 1, built.output
    assert built.stdout.startswith("PASS   tamper-protection")
    assert "FAIL   signed-head" in built.stdout and "GATEWAY_CHECKPOINT_KEY" in built.stdout
    assert (out / "index.html").is_file() and not (out / "checkpoint.json").exists()


def test_bad_input_is_one_line_and_nothing_is_recorded(url: str, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    cases = {
        ("sec-17a-4", "--from", "2026-13-01", "--to", "2026-12-01"): "is not a date",
        ("sec-17a-4", "--from", "2026-12-02", "--to", "2026-12-01"): "is before --from",
        ("sec-17a-4", "--from", "2026-12-01", "--to", "2026-12-01", "-o",
         str(tmp_path / "full")): "not an empty folder",
        ("sox", "--from", "2026-12-01"): "'sox' is not one of 'sec-17a-4'",
    }  # fmt: skip
    with AuditStore.open(url) as store:
        head = store.head()
    for args, said in cases.items():
        more = ["-o", str(tmp_path / "new")] if "-o" not in args else []
        done = run(url, "evidence", *args, *more, "--reviewer", "a.auditor")
        assert done.exit_code == 2, (args, done.output)
        assert said in done.output and "Traceback" not in done.output
    with AuditStore.open(url) as store:
        assert store.head() == head


def test_list_names_every_regime(url: str) -> None:
    listed = json.loads(run(url, "evidence", "--list", "--format", "json").stdout)
    assert [r["regime"] for r in listed] == list(REGIMES)


@pytest.mark.slow  # a browser and the verifier as processes
@pytest.mark.parametrize("regime", ["sec-17a-4", "dora"])
def test_the_pack_opens_in_a_browser_and_its_export_verifies_alone(
    url: str, tmp_path: Path, regime: str
) -> None:
    out = tmp_path / "pack"
    assert build(url, regime, out, "--with-content").exit_code == 0
    dom = rendered_dom(out / "index.html")
    for section in SECTIONS:
        assert f'id="{section}"' in dom
    assert "Requirements and evidence" in dom and "PASS" in dom
    screenshot(out / "index.html", tmp_path / f"evidence-pack-{regime}.png", "1000,1600")
    keys = out / "public-keys.json"
    code, report = run_standalone(tmp_path, "export", out / "export.jsonl", "--keys", keys)
    # 5 requests of 2 events, and the ACCESS event that records the content read
    assert code == 0 and report["events_checked"] == 11 and report["content_checked"] == 5, report
    for receipt in (out / "receipts").iterdir():
        code, report = run_standalone(tmp_path, "receipt", receipt, "--keys", keys)
        assert code == 0, report
