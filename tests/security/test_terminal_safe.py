"""Text output never hands a terminal a raw control, escape or invisible character.

A caller, task or file name can carry ESC/OSC sequences, CR, zero-width or bidi characters;
printed raw, they could clear an auditor's screen, rewrite a row or hide one. Every text
renderer escapes them visibly; JSON output keeps the exact value.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from gateway import Gateway, Settings
from gateway.cli import main
from gateway.cli._render import shown, text_table

SHIPPED = Path(__file__).resolve().parents[2] / "policies"

# What a hostile name may hold: a screen clear, an OSC title change, BEL, CR (overwrites the
# row from its start), zero-width space, right-to-left override, left-to-right isolate, a
# C1 control (CSI), a line separator and NUL.
RAW = ["\x1b", "\x07", "\r", "\u200b", "\u202e", "\u2066", "\x9b", "\u2028", "\x00"]
TASK = "ev\x1b[2J\x1b]0;pwned\x07il\r\u200b\u202e\u2066\x9bx\u2028"  # a file name: no NUL, no /
CALLER = "svc\x1b[1A\x1b[2K\rok\u200b\u202e\u2069"  # the store refuses NUL


def assert_terminal_safe(output: str) -> None:
    present = [hex(ord(c)) for c in RAW if c in output]
    assert present == [], f"raw characters reached the terminal: {present}"


@dataclass(frozen=True)
class Log:
    url: str
    policy_dir: Path
    hostile_request: str  # a request of task TASK, recorded by the gateway
    rejected_request: str  # a REJECTED event whose caller is CALLER, appended directly


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    policy_dir = tmp_path / "policies"
    policy_dir.mkdir()
    shutil.copytree(SHIPPED / "prompts", policy_dir / "prompts")
    shutil.copy(SHIPPED / "offline_demo.toml", policy_dir / f"{TASK}.toml")
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    settings = Settings(policy_dir=policy_dir, database_url=url, durability="os")
    with Gateway(settings, offline=True) as gw:
        hostile = gw.complete(TASK, "The reviewer reads the", caller="desk").request_id
    with AuditStore.open(url, durability="os") as store:
        store.append(
            EventDraft(
                kind=EventKind.REJECTED,
                request_id="r-hostile-caller",
                task=TASK,
                caller=CALLER,
                data={"error": "InputError", "reason": f"refused {CALLER}"},
            )
        )
    yield Log(url, policy_dir, hostile, "r-hostile-caller")


def run(log: Log, *args: str) -> Result:
    env = {
        "GATEWAY_DATABASE_URL": log.url,
        "GATEWAY_POLICY_DIR": str(log.policy_dir),
        "GATEWAY_DURABILITY": "os",
    }
    # color=True: click strips some ANSI sequences when it thinks no terminal listens.
    return CliRunner().invoke(main, list(args), env=env, color=True, catch_exceptions=False)


def test_shown_escapes_every_invisible_or_control_character_visibly() -> None:
    assert shown("payments-svc") == "payments-svc"
    assert shown("a\x1b[2Jb\r\u200b\u202e\ud800\x00\u00a0 c") == (
        "a\\x1b[2Jb\\r\\u200b\\u202e\\ud800\\x00\\xa0 c".replace("\\r", "\\x0d")
    )
    for char in ["\u2028", "\u2029", "\u2066", "\u2069", "\ufeff", "\x7f", "\x85", "\U000e0041"]:
        assert char not in shown(f"x{char}y")


def test_text_table_cells_are_shown_safely_and_stay_one_line_each() -> None:
    table = text_table(["TASK"], [[TASK], ["line\nbreak"]])
    assert_terminal_safe(table)
    assert len(table.splitlines()) == 4


def test_audit_list_escapes_names_and_json_keeps_them_exact(log: Log) -> None:
    text = run(log, "audit", "list")
    assert text.exit_code == 0, text.output
    assert_terminal_safe(text.output)
    assert "\\x1b" in text.output
    # Two header lines and two lines per request: no row faked or hidden
    assert len(text.output.splitlines()) == 2 + 2 * 2
    rows = json.loads(run(log, "audit", "list", "--format", "json").stdout)
    assert {r["caller"] for r in rows} == {"desk", CALLER}
    assert {r["task"] for r in rows} == {TASK}
    jsonl = run(log, "audit", "list", "--format", "jsonl").stdout.strip().split("\n")
    assert {json.loads(line)["caller"] for line in jsonl} == {"desk", CALLER}


@pytest.mark.parametrize("which", ["hostile_request", "rejected_request"])
def test_audit_show_escapes_names_and_data_and_json_keeps_them_exact(log: Log, which: str) -> None:
    request_id = getattr(log, which)
    text = run(log, "audit", "show", request_id)
    assert text.exit_code == 0, text.output
    assert_terminal_safe(text.output)
    data = json.loads(run(log, "audit", "show", request_id, "--format", "json").stdout)
    assert {e["task"] for e in data["events"]} == {TASK}
    if which == "rejected_request":
        (event,) = data["events"]
        assert event["caller"] == CALLER
        assert event["data"]["reason"] == f"refused {CALLER}"


def test_policy_review_escapes_file_and_task_names(log: Log) -> None:
    (log.policy_dir / f"{TASK}-broken.toml").write_text("schema = 1\n", encoding="utf-8")
    text = run(log, "policy", "review")
    assert text.exit_code == 1  # the broken file is refused
    assert_terminal_safe(text.output)
    assert "missing-key" in text.output
    data = json.loads(run(log, "policy", "review", "--format", "json").stdout)
    assert {t["task"] for t in data["tasks"]} == {TASK, f"{TASK}-broken"}
    assert {f["file"] for f in data["findings"]} >= {f"{TASK}-broken.toml"}


def test_policy_show_escapes_a_description_and_the_template(log: Log) -> None:
    path = log.policy_dir / f"{TASK}.toml"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace('description = "', 'description = "\\u001b[2J\\r\\u200b\\u202e', 1),
        encoding="utf-8",
    )
    (log.policy_dir / "prompts" / "offline_demo.md").write_text(
        "Be brief.\u202e\u200b\x1b[31m\n", encoding="utf-8"
    )
    shown_text = run(log, "policy", "show", TASK)
    assert shown_text.exit_code == 0, shown_text.output
    assert_terminal_safe(shown_text.output)
    data = json.loads(run(log, "policy", "show", TASK, "--format", "json").stdout)
    assert data["description"].startswith("\x1b[2J\r\u200b\u202e")
    assert data["task"] == TASK


def test_replay_table_escapes_the_task_and_json_keeps_it_exact(log: Log) -> None:
    text = run(log, "replay", log.hostile_request)
    assert text.exit_code == 0, text.output
    assert_terminal_safe(text.output)
    data = json.loads(run(log, "replay", log.hostile_request, "--format", "json").stdout)
    assert [r["task"] for r in data["requests"]] == [TASK]
