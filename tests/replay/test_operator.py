"""A replay run is recorded as its operator's, not as the replayed request's caller's: "who
re-sent this client's request" is answerable from the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import AuditStore, EventKind
from gateway import InputError, Settings
from gateway.replay import ReplaySession, Selection
from tests.gateway.conftest import MakeGateway, db_path, make_gateway, policy_dir  # noqa: F401


def test_replay_events_name_the_operator_and_keep_the_original_caller(
    make_gateway: MakeGateway,  # noqa: F811
    policy_dir: Path,  # noqa: F811
    db_path: Path,  # noqa: F811
) -> None:
    answer = make_gateway(offline=True).complete("offline_demo", "The reviewer", caller="desk-a")
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
    with ReplaySession.open(settings, operator="model-risk.jane") as session:
        session.run(session.prepare(Selection(request_ids=(answer.request_id,)), live=True))
    with AuditStore.open(settings.database_url, durability="os") as store:
        replays = [e for e in store.iter_events() if e.kind is EventKind.REPLAY]
    assert [e.caller for e in replays] == ["model-risk.jane", "model-risk.jane"]
    assert {e.data["original_caller"] for e in replays} == {"desk-a"}


def test_an_operator_name_with_control_characters_is_refused(
    policy_dir: Path,  # noqa: F811
    db_path: Path,  # noqa: F811
    make_gateway: MakeGateway,  # noqa: F811
) -> None:
    make_gateway(offline=True).complete("offline_demo", "The reviewer", caller="desk-a")
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
    with pytest.raises(InputError, match="operator"):
        ReplaySession.open(settings, operator="jane\x1b[2K")
