"""Experiment samples are not production records: `audit list` and replay selections leave
them out unless --include-experiments is given, and the human output says how many."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway import Gateway, Settings
from gateway.cli import main
from gateway.experiment import EXPERIMENT_CALLER, SamplingConfig, run_experiment

GREEDY = SamplingConfig(name="greedy", temperature=0.0)
SAMPLES = 3
FOOTER = "experiment request(s) matching the filters left out (use --include-experiments)"


@dataclass(frozen=True)
class Log:
    production: str  # the one ordinary request's id


@pytest.fixture
def log(policy_dir: Path, sqlite_url: str) -> Log:
    with Gateway(policy_dir=policy_dir, database_url=sqlite_url, durability="os") as gw:
        production = gw.complete("offline_demo", "The reviewer reads the").request_id
    settings = Settings(policy_dir=policy_dir, database_url=sqlite_url, durability="os")
    run_experiment(settings, "offline_demo", ["Payment held because"], SAMPLES, [GREEDY])
    return Log(production)


@pytest.fixture
def cli(
    log: Log, policy_dir: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Result]:
    monkeypatch.setenv("GATEWAY_DATABASE_URL", sqlite_url)
    monkeypatch.setenv("GATEWAY_POLICY_DIR", str(policy_dir))
    monkeypatch.setenv("GATEWAY_DURABILITY", "os")

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)

    return invoke


def _callers(rows: list[dict[str, object]]) -> list[object]:
    return [r["caller"] for r in rows]


def test_audit_list_leaves_experiments_out_and_says_how_many(
    cli: Callable[..., Result], log: Log
) -> None:
    result = cli("audit", "list")
    assert result.exit_code == 0, result.output
    assert log.production in result.stdout
    assert EXPERIMENT_CALLER not in result.stdout
    assert f"{SAMPLES} {FOOTER}" in result.stdout
    rows = json.loads(cli("audit", "list", "--format", "json").stdout)
    assert [r["request_id"] for r in rows] == [log.production]


def test_audit_list_includes_them_when_asked(cli: Callable[..., Result], log: Log) -> None:
    for args in (("--include-experiments",), ("--include-experiments", "--all")):
        rows = json.loads(cli("audit", "list", *args, "--format", "json").stdout)
        assert _callers(rows).count(EXPERIMENT_CALLER) == SAMPLES
        assert {r["label"] for r in rows if r["caller"] == EXPERIMENT_CALLER} == {
            "experiment:greedy"
        }
    table = cli("audit", "list", "--include-experiments").stdout
    assert "left out" not in table


def test_all_and_limit_leave_them_out_too(cli: Callable[..., Result], log: Log) -> None:
    for args in (("--all",), ("--limit", "1"), ("--task", "offline_demo", "--limit", "2")):
        rows = json.loads(cli("audit", "list", *args, "--format", "json").stdout)
        assert [r["request_id"] for r in rows] == [log.production], args


def test_replay_selections_leave_experiments_out(cli: Callable[..., Result], log: Log) -> None:
    for args in ((), ("--all",), ("--task", "offline_demo"), ("--limit", "1")):
        result = cli("replay", *args, "--format", "json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert [r["request_id"] for r in data["requests"]] == [log.production], args
        assert data["experiments_left_out"] == SAMPLES
    table = cli("replay", "--all").stdout
    assert "1 passed" in table
    assert f"{SAMPLES} {FOOTER}" in table


def test_replay_includes_them_when_asked_or_named(cli: Callable[..., Result], log: Log) -> None:
    data = json.loads(cli("replay", "--include-experiments", "--all", "--format", "json").stdout)
    assert _callers(data["requests"]).count(EXPERIMENT_CALLER) == SAMPLES
    assert data["summary"]["counts"]["passed"] == SAMPLES + 1
    assert data["experiments_left_out"] == 0
    sample = next(r["request_id"] for r in data["requests"] if r["caller"] == EXPERIMENT_CALLER)
    by_id = json.loads(cli("replay", sample, "--format", "json").stdout)
    assert [r["request_id"] for r in by_id["requests"]] == [sample]


def test_no_ordinary_caller_can_hide_under_the_experiment_name(
    policy_dir: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """The listing leaves the experiment caller out, so only the runner may record under it:
    a service naming itself so, a default caller and a server key are refused."""
    from audit import AuditStore
    from gateway.callers import CallerKeys
    from gateway.errors import InputError

    with (
        Gateway(policy_dir=policy_dir, database_url=sqlite_url, durability="os") as gw,
        pytest.raises(InputError, match="reserved for `gateway experiment`"),
    ):
        gw.complete("offline_demo", "The reviewer reads the", caller=EXPERIMENT_CALLER)
    with pytest.raises(InputError, match="reserved"):
        Gateway(
            policy_dir=policy_dir,
            database_url=sqlite_url,
            durability="os",
            default_caller=EXPERIMENT_CALLER,
        )
    settings = Settings(policy_dir=policy_dir, database_url=sqlite_url, durability="os")
    with CallerKeys.open(settings) as keys, pytest.raises(InputError, match="reserved"):
        keys.create(EXPERIMENT_CALLER)
    with AuditStore.open(sqlite_url) as store:
        events = list(store.iter_events())
    assert EXPERIMENT_CALLER not in {e.caller for e in events}
    # the refused attempt is listed (not hidden with the samples), the claimed name kept
    (rejected,) = [e for e in events if e.kind == "rejected"]
    assert rejected.caller is None and rejected.data["claimed_caller"] == EXPERIMENT_CALLER


def test_a_transform_that_derives_nothing_cannot_use_the_experiment_caller(
    policy_dir: Path, sqlite_url: str
) -> None:
    """An identity transform would record production requests, under the task's own
    fingerprint, among the samples the listing leaves out."""
    from gateway.errors import InputError

    with (
        Gateway(
            Settings(policy_dir=policy_dir, database_url=sqlite_url, durability="os"),
            policy_transform=lambda policy: policy,
        ) as gw,
        pytest.raises(InputError, match="reserved for requests under a derived policy"),
    ):
        gw.complete("offline_demo", "The reviewer reads the", caller=EXPERIMENT_CALLER)


def test_a_replay_of_samples_is_itself_listed(cli: Callable[..., Result], log: Log) -> None:
    """Replaying experiment samples records REPLAY events, which must not hide with them."""
    from audit import AuditStore
    from gateway.errors import InputError
    from gateway.replay import ReplaySession, Selection

    settings = Settings(
        policy_dir=Path(os.environ["GATEWAY_POLICY_DIR"]),
        database_url=os.environ["GATEWAY_DATABASE_URL"],
        durability="os",
    )
    with ReplaySession.open(settings) as session:
        session.run(session.prepare(Selection(limit=None, include_experiments=True)))
    with pytest.raises(InputError, match="reserved for experiment samples"):
        ReplaySession.open(settings, operator=EXPERIMENT_CALLER)
    with AuditStore.open(settings.database_url) as store:
        replays = [e for e in store.iter_events() if e.kind == "replay"]
    assert replays and all(e.caller != EXPERIMENT_CALLER for e in replays)
