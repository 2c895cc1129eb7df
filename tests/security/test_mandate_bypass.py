"""No path bypasses a mandate (DESIGN.md §3 invariant 11): an experiment that changes what a
task's reviewed policy mandates on Claude runs only when asked to, labelled, and never shares
the task's replay cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventKind, StoredEvent
from gateway import Gateway, PolicyViolation, Settings
from gateway.cli import main
from gateway.experiment import SamplingConfig, run_experiment
from tests.fakes.messages_api import FakeMessagesAPI

SHIPPED = Path(__file__).resolve().parents[2] / "policies"
PROMPT = "Transaction: pay 9,800 EUR to ACME Holdings"


@pytest.fixture
def settings(tmp_path: Path, fake_api: FakeMessagesAPI) -> Settings:
    return Settings(
        policy_dir=SHIPPED,
        database_url=f"sqlite:///{tmp_path / 'audit.db'}",
        durability="os",
        anthropic_api_key="sk-ant-test-mandate",
        default_caller="tests",
        anthropic_base_url=fake_api.base_url,
    )


def _events(settings: Settings) -> list[StoredEvent]:
    with AuditStore.open(settings.database_url, durability="os") as store:
        return list(store.iter_events())


def _cli(settings: Settings, *args: str) -> tuple[int, str]:
    env = {
        "GATEWAY_DATABASE_URL": settings.database_url,
        "GATEWAY_POLICY_DIR": str(SHIPPED),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DURABILITY": "os",
        "ANTHROPIC_API_KEY": "sk-ant-test-mandate",
        "ANTHROPIC_BASE_URL": str(settings.anthropic_base_url),
    }
    result = CliRunner().invoke(main, ["experiment", *args], env=env)
    return result.exit_code, result.stderr


def test_changing_a_mandated_temperature_on_claude_is_refused(
    settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    # compliance_review mandates temperature 0.0 and lets no caller set it.
    code, err = _cli(
        settings, "compliance_review", "--prompt", PROMPT, "-n", "1", "--config", "hot=1.0"
    )
    assert code == 2
    assert "changes what the reviewed policy" in err and "--unsafe-override-mandate" in err
    assert fake_api.requests == []  # nothing was sent
    with pytest.raises(PolicyViolation):
        run_experiment(
            settings,
            "compliance_review",
            [PROMPT],
            1,
            [SamplingConfig(name="hot", temperature=1.0)],
        )


def test_the_unsafe_flag_runs_it_labelled_with_both_fingerprints(
    settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    code, err = _cli(
        settings, "compliance_review", "--prompt", PROMPT, "-n", "1", "--config", "hot=1.0",
        "--unsafe-override-mandate",
    )  # fmt: skip
    assert code == 0, err
    assert "warning: --unsafe-override-mandate" in err
    [request] = [e for e in _events(settings) if e.kind is EventKind.REQUEST]
    with Gateway(settings) as gw:
        reviewed = gw._core.policies.get("compliance_review").fingerprint
    assert request.data["derived"] == {"label": "experiment:hot", "reviewed_fingerprint": reviewed}
    assert request.policy_fingerprint != reviewed
    assert request.data["key_scope"]["derived"] == "experiment:hot"


def test_an_experiment_never_serves_the_tasks_replay_cache(
    settings: Settings, fake_api: FakeMessagesAPI
) -> None:
    # The same sampling values as the reviewed policy: no mandate changes, the same wire body.
    same = SamplingConfig(name="as-reviewed", temperature=0.0)
    run_experiment(settings, "compliance_review", [PROMPT], 1, [same])
    assert len(fake_api.requests) == 1
    with Gateway(settings) as gw:
        answer = gw.complete("compliance_review", PROMPT)
    assert not answer.cached  # the experiment's answer is not the task's recorded answer
    assert len(fake_api.requests) == 2
    assert fake_api.requests[0].body == fake_api.requests[1].body
