"""A policy's effective_date is enforced: before that day the gateway refuses the task (a
PolicyViolation naming the date, recorded REJECTED, nothing sent upstream); review, show and
the sign-off sheet say it is not yet in effect. The policy set's clock is injected as the day
it is loaded with (``PolicySet.load(..., today=)``); the gateway's uses the UTC date."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import EventKind
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.errors import PolicyViolation
from gateway.policy import PolicySet
from tests.fakes.messages_api import FakeMessagesAPI
from tests.gateway.conftest import (  # noqa: F401 - fixtures, used by name
    MakeGateway,
    db_path,
    events,
    make_gateway,
    policy_dir,
)
from tests.policy.conftest import VALID, WriteFolder

PROMPT = "Transaction: EUR 9,900 from Jane Roe to ACME Shipping Ltd."


def _dated(day: str, text: str = VALID) -> str:
    """``text`` with ``effective_date = day`` after its (top-level) owner line."""
    head, owner, rest = text.partition("\nowner = ")
    line, _, tail = rest.partition("\n")
    return f"{head}{owner}{line}\neffective_date = {day}\n{tail}"


def _set(write_folder: WriteFolder, catalog: Catalog, day: str, today: date) -> PolicySet:
    folder = write_folder({"task_a.toml": _dated(day), "prompts/system.md": "Answer briefly."})
    return PolicySet.load(folder, catalog, today=today)


@pytest.mark.parametrize(
    ("today", "in_effect"),
    [(date(2026, 12, 31), False), (date(2027, 1, 1), True), (date(2027, 1, 2), True)],
)
def test_a_policy_is_in_effect_from_its_effective_date_on(
    write_folder: WriteFolder, catalog: Catalog, today: date, in_effect: bool
) -> None:
    policies = _set(write_folder, catalog, "2027-01-01", today)
    policy = policies.get("task_a")  # it loads either way: it can be reviewed and approved
    assert policies.in_effect(policy) is in_effect
    if in_effect:
        policies.check_in_effect(policy)
        return
    with pytest.raises(PolicyViolation) as refused:
        policies.check_in_effect(policy)
    assert refused.value.key == "effective_date"
    assert "task 'task_a' takes effect on 2027-01-01" in refused.value.message
    assert "today is 2026-12-31" in refused.value.message


def test_a_policy_without_an_effective_date_is_in_effect(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    folder = write_folder({"task_a.toml": VALID, "prompts/system.md": "Answer briefly."})
    policies = PolicySet.load(folder, catalog, today=date(1999, 1, 1))
    assert policies.in_effect(policies.get("task_a"))


def _write(policy_dir: Path, day: str) -> None:  # noqa: F811 - the fixture's folder
    text = (policy_dir / "compliance_review.toml").read_text(encoding="utf-8")
    (policy_dir / "compliance_review.toml").write_text(_dated(day, text), encoding="utf-8")


def test_the_gateway_refuses_a_task_before_its_effective_date_and_sends_nothing(
    policy_dir: Path,  # noqa: F811
    make_gateway: MakeGateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
    db_path: Path,  # noqa: F811
) -> None:
    _write(policy_dir, "2999-12-31")
    gateway = make_gateway()
    with pytest.raises(PolicyViolation, match="takes effect on 2999-12-31") as refused:
        gateway.complete("compliance_review", PROMPT)
    assert refused.value.key == "effective_date"
    assert fake_api.requests == []  # nothing sent
    (rejected,) = [e for e in events(db_path) if e.kind == EventKind.REJECTED]
    assert rejected.data["key"] == "effective_date" and rejected.task == "compliance_review"
    assert [str(e.kind) for e in events(db_path)] == ["rejected"]  # no REQUEST, no call
    refusal = pytest.raises(PolicyViolation, match="takes effect on 2999-12-31")
    with refusal, gateway.stream("compliance_review", PROMPT):
        pass
    assert fake_api.requests == []


def test_the_gateway_serves_a_task_whose_effective_date_has_passed(
    policy_dir: Path,  # noqa: F811
    make_gateway: MakeGateway,  # noqa: F811
    fake_api: FakeMessagesAPI,
) -> None:
    _write(policy_dir, "2020-01-01")
    result = make_gateway().complete("compliance_review", PROMPT)
    assert result.text and len(fake_api.requests) == 1


def test_review_show_and_the_sheet_say_a_policy_is_not_yet_in_effect(
    write_folder: WriteFolder, tmp_path: Path
) -> None:
    folder = write_folder(
        {
            "task_a.toml": _dated("2999-12-31"),
            "task_b.toml": _dated("2020-01-01"),
            "prompts/system.md": "Answer briefly.",
        }
    )
    env = {"GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"}
    runner = CliRunner()
    review = runner.invoke(main, ["policy", "review", str(folder)], env=env)
    assert review.exit_code == 0, review.output  # reviewable and approvable ahead of time
    signoff = review.output.split("Sign-off:")[1]
    row_a = next(line for line in signoff.splitlines() if line.startswith("task_a"))
    row_b = next(line for line in signoff.splitlines() if line.startswith("task_b"))
    assert "2999-12-31 (not yet)" in row_a and "2020-01-01" in row_b and "not yet" not in row_b
    assert "Not yet in effect" in review.output and "task_a on 2999-12-31" in review.output
    data = json.loads(
        runner.invoke(main, ["policy", "review", str(folder), "--format", "json"], env=env).output
    )
    in_effect = {t["task"]: t["signoff"]["in_effect"] for t in data["tasks"]}
    assert in_effect == {"task_a": False, "task_b": True}

    show = ["policy", "show", "task_a", "--policy-dir", str(folder)]
    text = runner.invoke(main, show, env=env).output
    assert "2999-12-31 (not yet in effect: the gateway refuses its requests until then)" in text
    shown = json.loads(runner.invoke(main, [*show, "--format", "json"], env=env).output)
    assert shown["effective_date"] == "2999-12-31" and shown["in_effect"] is False
    sheet = tmp_path / "sheet.html"
    made = runner.invoke(main, [*show, "--format", "html", "-o", str(sheet)], env=env)
    assert made.exit_code == 0, made.output
    assert "2999-12-31 (not yet in effect on this sheet" in sheet.read_text(encoding="utf-8")


def test_runs_derived_from_a_task_not_yet_in_effect_are_refused_too(
    policy_dir: Path,  # noqa: F811
    make_gateway: MakeGateway,  # noqa: F811
    db_path: Path,  # noqa: F811
) -> None:
    _write(policy_dir, "2999-12-31")
    with pytest.raises(PolicyViolation, match="takes effect on 2999-12-31"):
        make_gateway(offline=True).complete("compliance_review", "The reviewer reads the")
    assert [str(e.kind) for e in events(db_path)] == ["rejected"]
