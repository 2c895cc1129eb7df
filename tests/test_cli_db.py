"""`gateway db` (gateway/cli/db_cmd.py) over the library's schema functions."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.cli.db_cmd import db_group


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["db", *args], env={"GATEWAY_DATABASE_URL": url})


def test_the_db_group_is_the_one_in_its_module() -> None:
    # The command table loads each group on first use, so ask for it as click would.
    assert main.get_command(click.Context(main), "db") is db_group
    assert set(db_group.commands) == {"upgrade", "current", "grant"}


def test_upgrade_then_current_on_a_new_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    before = run(url, "current")
    assert before.exit_code == 0
    assert before.output.startswith("revision none (this gateway needs ")
    assert "behind: run `gateway db upgrade`" in before.output
    upgraded = run(url, "upgrade")
    assert upgraded.exit_code == 0 and upgraded.output.endswith("(head).\n")
    after = run(url, "current")
    assert after.exit_code == 0 and after.output.endswith("up to date)\n")
    assert run(url, "upgrade").exit_code == 0  # again: nothing to do


def test_grant_on_sqlite_is_one_line_exit_4(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    result = run(url, "grant", "reviewer", "--read-only")
    assert result.exit_code == 4
    assert result.stderr.count("\n") == 1 and "only on PostgreSQL" in result.stderr


def test_grant_refuses_a_role_name_that_is_not_plain(tmp_path: Path) -> None:
    result = run(f"sqlite:///{tmp_path / 'new.db'}", "grant", "x; DROP TABLE events")
    assert result.exit_code == 4
    assert "not a plain PostgreSQL role name" in result.stderr
    assert "Traceback" not in result.output
