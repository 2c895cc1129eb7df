"""`gateway audit export` records who exported (SEC 17a-4 asks for the actor of each access)."""

from __future__ import annotations

import getpass

from click.testing import CliRunner

from audit import AuditStore, EventKind
from gateway.cli import main


def test_the_export_event_names_the_reviewer(sqlite_url: str) -> None:
    AuditStore.open(sqlite_url).close()  # export reads an existing log; it creates none
    env = {"GATEWAY_DATABASE_URL": sqlite_url}
    runner = CliRunner()
    named = runner.invoke(main, ["audit", "export", "--reviewer", "a.auditor"], env=env)
    default = runner.invoke(main, ["audit", "export"], env=env)
    assert named.exit_code == 0 and default.exit_code == 0, named.stderr + default.stderr
    with AuditStore.open(sqlite_url) as store:
        exports = [e for e in store.iter_events() if e.kind == EventKind.EXPORT]
    assert [e.caller for e in exports] == ["a.auditor", getpass.getuser()]
