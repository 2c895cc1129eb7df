"""replay --verify re-plans a streamed request to the body that went on the wire (the plan's,
with "stream": true), so a streamed recording verifies like any other."""

from __future__ import annotations

from pathlib import Path

from gateway import Settings
from gateway.replay import Outcome, ReplaySession, Selection
from tests.gateway.conftest import MakeGateway, db_path, make_gateway, policy_dir  # noqa: F401


def test_a_streamed_recording_passes_verify(
    make_gateway: MakeGateway,  # noqa: F811
    policy_dir: Path,  # noqa: F811
    db_path: Path,  # noqa: F811
) -> None:
    gw = make_gateway(offline=True)
    with gw.stream("offline_demo", "The reviewer reads the", caller="desk") as stream:
        for _event in stream:
            pass
    settings = Settings(policy_dir=policy_dir, database_url=f"sqlite:///{db_path}")
    with ReplaySession.open(settings) as session:
        report = session.run(session.prepare(Selection(request_ids=(stream.request_id,))))
    [row] = report.requests
    assert row.outcome is Outcome.PASSED, row.reason
