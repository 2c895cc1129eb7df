"""`gateway policy show TASK --format html`: a printable sign-off sheet with what the task makes
the model do (model, parameters, prompt, schema, tools), every finding, the fingerprint and
its approvals; self-contained, escaped, and it opens in headless Chromium.

``GATEWAY_UPDATE_SCREENSHOTS=1`` also writes the screenshot to docs/images/ (the README's)."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore
from gateway.cli import main
from tests.policy.conftest import SHIPPED
from tests.support.chromium import chromium, rendered_dom
from tests.support.chromium import screenshot as shared_screenshot

REPO = Path(__file__).resolve().parents[2]
SIGNOFF = (
    'risk_tier = "high"\neffective_date = 2027-01-01\n'
    'regulations = ["MiFID II Art. 16(6)", "EU AI Act Art. 12"]\n'
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The shipped policies; sanctions_screening with sign-off fields and a review warning."""
    copy = tmp_path / "policies"
    shutil.copytree(SHIPPED, copy)
    path = copy / "sanctions_screening.toml"
    text = path.read_text().replace("reproducible = true", SIGNOFF + "reproducible = true", 1)
    path.write_text(text.replace("max_tokens = 2048", "max_tokens = 30000", 1))
    return copy


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()
    return url


def run(db: str, *args: str, **env: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": db, **env})


def sheet(db: str, folder: Path, out: Path, task: str = "sanctions_screening") -> str:
    result = run(db, "policy", "show", task, "--policy-dir", str(folder), "--format", "html",
                 "-o", str(out), GATEWAY_REQUIRE_APPROVALS="2")  # fmt: skip
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def test_the_sheet_shows_what_is_approved_every_finding_and_the_approvals(
    db: str, folder: Path, tmp_path: Path
) -> None:
    key = secrets.token_hex(32)
    approved = run(db, "policy", "approve", "sanctions_screening", "--approver", "a.compliance",
                   "--policy-dir", str(folder), GATEWAY_APPROVER_KEY=key)  # fmt: skip
    assert approved.exit_code == 0, approved.output
    html = sheet(db, folder, tmp_path / "sheet.html")
    shown = json.loads(
        run(db, "policy", "show", "sanctions_screening", "--policy-dir", str(folder),
            "--format", "json").output
    )  # fmt: skip
    assert shown["fingerprint"] in html
    assert "<title>Policy sign-off: sanctions_screening</title>" in html
    assert "claude-sonnet-4-6" in html and "anthropic-version 2023-06-01" in html
    assert "30000" in html and "temperature" in html
    prompt = (folder / "prompts" / "sanctions_screening.md").read_text()
    assert prompt.splitlines()[0].replace("'", "&#x27;") in html  # the whole prompt, escaped
    assert "lookup_entity" in html and "(strict)" in html  # the tool and its schema
    assert "max-tokens-streaming" in html and "1 warnings" in html
    assert "a.compliance" in html and "1 of 2 required: NOT ENOUGH" in html
    assert "high" in html and "2027-01-01" in html and "EU AI Act Art. 12" in html
    assert "<script" not in html and "default-src 'none'" in html
    assert "@page" in html and "break-inside: avoid" in html  # print-friendly


def test_every_value_on_the_sheet_is_escaped(db: str, folder: Path, tmp_path: Path) -> None:
    prompt = folder / "prompts" / "sanctions_screening.md"
    prompt.write_text("<script>alert(1)</script> & <b>bold</b>\n")
    html = sheet(db, folder, tmp_path / "sheet.html")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html


def test_without_an_audit_database_the_sheet_says_approvals_are_unknown(
    folder: Path, tmp_path: Path
) -> None:
    html = sheet(f"sqlite:///{tmp_path / 'none.db'}", folder, tmp_path / "sheet.html")
    assert "No audit database: no approvals." in html
    assert not (tmp_path / "none.db").exists()


def screenshot(html: Path, png: Path, size: str = "1000,1400") -> None:
    shared_screenshot(html, png, size, min_bytes=10_000)


@pytest.mark.slow  # a browser
def test_the_sheet_opens_in_headless_chromium(db: str, folder: Path, tmp_path: Path) -> None:
    chromium()
    for name in ("a.compliance", "b.risk"):
        run(db, "policy", "approve", "sanctions_screening", "--approver", name, "--policy-dir",
            str(folder), GATEWAY_APPROVER_KEY=secrets.token_hex(32))  # fmt: skip
    path = tmp_path / "signoff-sheet.html"
    sheet(db, folder, path)
    dom = rendered_dom(path)
    assert "Policy sign-off: sanctions_screening" in dom
    assert "2 of 2 required: enough" in dom
    screenshot(path, tmp_path / "signoff-sheet.png")
