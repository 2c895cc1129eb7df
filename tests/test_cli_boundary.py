"""The CLI's one boundary: one table of exit codes, one line per error, never a traceback."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import audit
import gateway.errors
from audit import AuditStore, EventDraft, EventKind
from gateway.catalog._loader import CatalogError
from gateway.cli import main
from gateway.cli._boundary import EXIT_CODES, ExitCode, GatewayGroup, exit_code_for
from gateway.cli._context import settings_of
from gateway.experiment import ExperimentConfigError
from gateway.providers.local import LocalRequestError

REPO = Path(__file__).resolve().parents[1]


def run(url: str, *args: str) -> Result:
    env = {"GATEWAY_DATABASE_URL": url, "GATEWAY_CHECKPOINT_KEY": ""}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def junk_url(tmp_path: Path) -> str:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"junk" * 1000)
    return f"sqlite:///{junk}"


@pytest.fixture
def url(sqlite_url: str) -> str:
    with AuditStore.open(sqlite_url) as store:
        store.append(EventDraft(kind=EventKind.REQUEST, request_id="r-1", task="pricing"))
    return sqlite_url


def test_every_error_of_the_gateway_tree_is_in_the_table() -> None:
    tree = [
        cls
        for _, cls in inspect.getmembers(gateway.errors, inspect.isclass)
        if issubclass(cls, gateway.errors.GatewayError)
    ]
    assert len(tree) >= 14
    assert set(tree) == set(EXIT_CODES)


def test_the_table_keeps_the_documented_codes() -> None:
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0,
        "CHECK_FAILED": 1,
        "BAD_INPUT": 2,
        "UPSTREAM": 3,
        "AUDIT": 4,
        "INTERNAL": 70,
        "INTERRUPTED": 130,
        "BROKEN_PIPE": 141,
    }
    e = gateway.errors
    assert exit_code_for(e.UnknownTask("x", [])) is ExitCode.BAD_INPUT
    assert exit_code_for(e.AuditWriteError("x")) is ExitCode.AUDIT
    assert exit_code_for(e.UpstreamUnavailable("x")) is ExitCode.UPSTREAM
    assert exit_code_for(e.OutputValidationError("x")) is ExitCode.CHECK_FAILED


def test_errors_defined_elsewhere_take_their_ancestors_code() -> None:
    assert exit_code_for(CatalogError("x")) is ExitCode.BAD_INPUT
    assert exit_code_for(ExperimentConfigError("x")) is ExitCode.BAD_INPUT
    assert exit_code_for(LocalRequestError("x")) is ExitCode.BAD_INPUT


def test_no_error_class_carries_its_own_exit_code() -> None:
    for module in (gateway.errors, audit.errors):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            assert not hasattr(cls, "exit_code"), cls


@pytest.mark.parametrize(
    "args",
    [
        ("audit", "list"),
        ("audit", "show", "r-1"),
        ("audit", "verify"),
        ("audit", "export"),
        ("audit", "checkpoint", "--unsigned"),
        ("db", "current"),
        ("db", "upgrade"),
    ],
)
def test_an_audit_store_failure_is_one_line_exit_4(junk_url: str, args: tuple[str, ...]) -> None:
    result = run(junk_url, *args)
    assert result.exit_code == ExitCode.AUDIT, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_a_missing_request_id_is_exit_2_never_70(url: str) -> None:
    result = run(url, "audit", "show", "no-such-request")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.stderr.count("\n") == 1 and "no-such-request" in result.stderr


def test_a_foreign_checkpoint_is_exit_2(url: str, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    AuditStore.open(other).close()  # a checkpoint is of an existing log: it creates none
    head = tmp_path / "head.json"
    assert run(other, "audit", "checkpoint", "--unsigned", "-o", str(head)).exit_code == 0
    result = run(url, "audit", "verify", "--checkpoint", str(head))
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.stderr.count("\n") == 1 and "not this one" in result.stderr


def test_a_check_that_fails_exits_1_without_an_error_line(tmp_path: Path) -> None:
    broken = tmp_path / "policies"
    broken.mkdir()
    (broken / "bad.toml").write_text("task = 'bad'\n[model]\nid = 'no-such-model'\n")
    result = CliRunner().invoke(main, ["policy", "review", str(broken)])
    assert result.exit_code == ExitCode.CHECK_FAILED
    assert "REFUSED" in result.stdout and "error:" not in result.stderr


def test_settings_are_read_once_per_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    @click.group(cls=GatewayGroup)
    def root() -> None:
        pass

    @root.command()
    @click.pass_context
    def twice(ctx: click.Context) -> None:
        first = settings_of(ctx)
        os.environ["GATEWAY_DATABASE_URL"] = "sqlite:///changed.db"
        click.echo(f"{first.database_url} {settings_of().database_url}")
        assert settings_of(ctx) is first

    monkeypatch.setenv("GATEWAY_DATABASE_URL", "sqlite:///first.db")
    result = CliRunner().invoke(root, ["twice"], catch_exceptions=False)
    assert result.output == "sqlite:///first.db sqlite:///first.db\n"


def test_no_command_reads_the_environment_itself() -> None:
    for source in sorted((REPO / "gateway" / "cli").glob("*.py")):
        if source.name != "_context.py":
            assert "from_env" not in source.read_text(encoding="utf-8"), source.name


@pytest.mark.slow  # the CLI as a process
def test_a_closed_stdout_ends_quietly_not_as_an_internal_error(url: str) -> None:
    # The reader is gone before the gateway writes its first line: `gateway audit list | head`
    # where head has already exited.
    env = {**os.environ, "GATEWAY_DATABASE_URL": url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "audit", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == ExitCode.BROKEN_PIPE, err
    assert err == ""
