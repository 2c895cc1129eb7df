"""The CLI imports only what a command needs: `gateway --help` loads no command module, and
no command that calls no model loads the SDK. (Start-up time itself is measured in bench/,
bench/results/cli_start.md; a test holds what is imported, which does not depend on load.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from gateway.cli import main
from gateway.cli._main import COMMANDS

# Starts processes (gateway serve, fresh interpreters): outside the fast loop.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("anthropic", "numpy", "jsonschema", "sqlalchemy", "pydantic", "alembic", "uvicorn")


def _modules_loaded(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    """Every module (full dotted name) in ``sys.modules`` after the command ran, in a fresh
    interpreter."""
    script = (
        "import sys, json\n"
        "from gateway.cli import main\n"
        "try:\n"
        f"    main.main(args={args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**(env or {}), "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=True,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _imported_by(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    """The top-level packages the command imported."""
    return {name.split(".")[0] for name in _modules_loaded(args, env)}


def test_help_imports_no_command_and_no_heavy_library() -> None:
    loaded = _imported_by(["--help"])
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_audit_list_does_not_import_the_sdk(tmp_path: Path) -> None:
    env = {"GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"}
    loaded = _imported_by(["audit", "list"], env)
    assert "anthropic" not in loaded and "numpy" not in loaded


# What reading the log needs none of: the schema's migrations (a new SQLite file is made from
# their snapshot), policy loading (jsonschema, the review rules' regular expressions), and
# structlog (nobody configured it).
NOT_FOR_READING = {"alembic", "jsonschema", "re2", "structlog", "anthropic", "numpy"}


def test_audit_list_and_show_import_neither_alembic_nor_policy_loading(tmp_path: Path) -> None:
    env = {
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(ROOT / "policies"),
    }
    # A new audit file (created on first use), a selection that matches nothing (the known
    # tasks are named), and a request that is not there: each path reads the log only.
    assert not _imported_by(["audit", "list"], env) & NOT_FOR_READING
    assert not _imported_by(["audit", "list", "--task", "none"], env) & NOT_FOR_READING
    assert not _imported_by(["audit", "show", "req_none"], env) & NOT_FOR_READING


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_help_line_of_each_lazy_command_is_its_own(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None
    assert command.get_short_help_str(limit=60) == COMMANDS[name][2]


# The schema is Core tables, not ORM models: reading the log maps no classes, so the ORM (about
# 0.1 s of CPU, bench/results/cli_start.md) stays out; and a SQLite log needs no PostgreSQL
# dialect (erasure's insert is SQL both backends take).
NOT_FOR_READING_MODULES = ("sqlalchemy.orm", "sqlalchemy.dialects.postgresql")


def _recorded_log(tmp_path: Path) -> tuple[dict[str, str], str]:
    """A log holding one request recorded with the offline model, and that request's id."""
    env = {
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(ROOT / "policies"),
        "PYTHONPATH": str(ROOT),
    }
    gateway = [sys.executable, "-m", "gateway"]
    for args in (["db", "upgrade"], ["ask", "offline_demo", "What is a sanctions screen?"]):
        subprocess.run([*gateway, *args], env=env, cwd=tmp_path, capture_output=True, check=True)
    listed = subprocess.run(
        [*gateway, "audit", "list", "--format", "json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    (row,) = json.loads(listed.stdout)
    return env, row["request_id"]


def test_reading_a_sqlite_log_imports_no_orm_and_no_postgresql_dialect(tmp_path: Path) -> None:
    env, request_id = _recorded_log(tmp_path)
    for args in (
        ["audit", "list"],
        ["audit", "list", "--task", "none"],
        ["audit", "show", request_id],
        ["audit", "show", "req_none"],
    ):
        loaded = _modules_loaded(args, env)
        assert "sqlalchemy" in loaded, args  # it did read the log
        found = {
            m for m in loaded for n in NOT_FOR_READING_MODULES if m == n or m.startswith(n + ".")
        }
        assert not found, (args, sorted(found))


def test_listing_a_signed_log_loads_no_key_library(tmp_path: Path) -> None:
    # The log is signed and its record key file is beside it, so `audit list` opens the store
    # with a signer; listing signs and checks nothing, and `cryptography` (a tenth of the
    # start, bench/results/cli_start.md) loads at the first key use only.
    env, _ = _recorded_log(tmp_path)
    assert (tmp_path / "gateway-record.key").exists()
    for args in (["audit", "list"], ["audit", "list", "--task", "none"]):
        loaded = {name.split(".")[0] for name in _modules_loaded(args, env)}
        assert "sqlalchemy" in loaded, args  # it did read the log
        assert "cryptography" not in loaded, args


def test_showing_a_request_without_its_content_loads_no_erasing(tmp_path: Path) -> None:
    # The erasure state matters to a content read only (--content --reviewer).
    env, request_id = _recorded_log(tmp_path)
    loaded = _modules_loaded(["audit", "show", request_id], env)
    assert "gateway.evidence._auditing" in loaded  # it did read the request
    assert "gateway.evidence._erasing" not in loaded


def test_a_command_that_exits_with_its_objects_frozen_loses_no_output(tmp_path: Path) -> None:
    # The CLI freezes the heap at exit (its last collection skipped): whatever a command wrote,
    # to a file or a pipe, is complete when the process is gone.
    env, request_id = _recorded_log(tmp_path)
    gateway = [sys.executable, "-m", "gateway"]
    exported = tmp_path / "log.jsonl"
    subprocess.run(
        [*gateway, "audit", "export", "--output", str(exported)],
        env=env, cwd=tmp_path, capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    events = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [(e["kind"], e["request_id"]) for e in events] == [
        ("request", request_id),
        ("response", request_id),
    ]
    shown = subprocess.run(
        [*gateway, "audit", "show", request_id, "--format", "json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert json.loads(shown.stdout)
