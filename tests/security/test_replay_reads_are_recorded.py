"""`replay --live` prints each recorded answer beside the new one: a content read, recorded
as an ACCESS event naming who ran it and which answer it read, like `audit show --content`.
Before, the answers were printed and nothing on the log said who had read them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventKind
from gateway.cli import main
from gateway.evidence import Auditing
from gateway.settings import Settings
from tests.gateway.conftest import MakeGateway

QUESTION = "Transaction: 7 EUR to ACME, in process"


@pytest.fixture
def recorded(make_gateway: MakeGateway) -> str:
    """The request id of one recorded answer."""
    return (
        make_gateway(offline=True).complete("compliance_review", QUESTION, caller="desk").request_id
    )


def replay(db_path: Path, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["replay", *args], env={"GATEWAY_DATABASE_URL": f"sqlite:///{db_path}"}
    )


def test_a_live_replay_records_the_answers_it_shows(recorded: str, db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    result = replay(db_path, recorded, "--live", "--operator", "j.smith")
    assert result.exit_code == 0, result.output
    assert "recorded (" in result.output  # the recorded answer was shown

    with AuditStore.open(url) as store:
        (response,) = store.iter_events(kind=EventKind.RESPONSE, request_ids=[recorded])
        (access,) = store.iter_events(kind=EventKind.ACCESS)
        (outcome,) = (
            e for e in store.iter_events(kind=EventKind.REPLAY) if e.data["phase"] == "outcome"
        )
    assert access.caller == "j.smith" and access.data["reviewer"] == "j.smith"
    assert access.data["read_request_id"] == recorded
    assert access.data["seqs"] == [response.seq]
    assert access.data["payloads"] == response.payload_digests
    assert access.data["replay_run"] == outcome.request_id
    with Auditing.open(Settings(database_url=url)) as auditing:
        assert [e.seq for e in auditing.reads_of(recorded)] == [access.seq]


def test_a_replay_that_shows_no_recorded_answer_records_no_read(
    recorded: str, db_path: Path
) -> None:
    result = replay(db_path, recorded, "--verify")
    assert result.exit_code == 0, result.output
    with AuditStore.open(f"sqlite:///{db_path}") as store:
        assert list(store.iter_events(kind=EventKind.ACCESS)) == []
