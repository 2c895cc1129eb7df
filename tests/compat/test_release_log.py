"""A log written by the previous release's code still verifies, replays and serves from cache.

The log in release_0_1_0/ was written by ``write_release_log.py`` with the commit named in
WRITTEN_BY, before the house was restructured. Today's code must read every event of it as
that code did: the chain, the record signatures and the signed checkpoint verify; every
recorded request re-plans to the same request hash under its recorded policy; and a repeat of
a recorded request is served from that log (offline model and Claude path) without a call.
Its database is upgraded first (`gateway db upgrade`), as a deployment's is.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from tests.compat.write_release_log import QUESTION, RECORD_KEY
from tests.fakes.messages_api import FakeMessagesAPI

RELEASE = Path(__file__).parent / "release_0_1_0"


@pytest.fixture
def release(tmp_path: Path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(RELEASE, copy)
    # Upgrading a deployment starts with its database's schema, as the release notes say.
    code, out = gateway(env_for(copy), "db", "upgrade")
    assert code == 0, out
    return copy


def env_for(release: Path, **extra: str) -> dict[str, str]:
    return {
        "GATEWAY_DATABASE_URL": f"sqlite:///{release / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(release / "policies"),
        "GATEWAY_DURABILITY": "os",
        "GATEWAY_RECORD_KEY": RECORD_KEY,
        "ANTHROPIC_API_KEY": "",
        **extra,
    }


def gateway(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout + result.stderr


def verify(release: Path) -> tuple[int, str]:
    return gateway(
        env_for(release),
        *("audit", "verify", "--checkpoint", str(release / "checkpoint.json")),
        *("--public-key", str(release / "record.pub")),
        *("--public-key", str(release / "checkpoint.pub")),
    )


def test_the_release_log_verifies_against_its_signed_checkpoint(release: Path) -> None:
    code, out = verify(release)
    assert code == 0, out
    assert "intact: 46 events" in out
    assert "extends checkpoint seq 46" in out


def test_every_recorded_request_replays_to_its_recorded_hash(release: Path) -> None:
    code, out = gateway(env_for(release), "replay", "--verify", "--include-experiments")
    assert code == 0, out
    assert "16 request(s): 0 identical, 0 differing, 0 failed, 0 skipped, 16 passed" in out
    code, out = verify(release)  # today's REPLAY events chain onto the old log
    assert code == 0, out


@pytest.mark.parametrize(
    ("caller", "offline"), [("desk-a", True), ("desk-c", False)], ids=["local", "claude"]
)
def test_a_repeat_is_served_from_the_release_log(release: Path, caller: str, offline: bool) -> None:
    with FakeMessagesAPI() as fake:  # scripted with nothing: any upstream call would fail
        env = env_for(release, ANTHROPIC_API_KEY="sk-ant-compat", ANTHROPIC_BASE_URL=fake.base_url)
        args = ["ask", "compliance_review", QUESTION, "--caller", caller, "--format", "json"]
        args += ["--override", "max_tokens=256", *(["--offline"] if offline else [])]
        code, out = gateway(env, *args)
        assert code == 0, out
        assert fake.requests == []
    answer = json.loads(out[: out.rindex("}") + 1])
    assert answer["cached"] is True
    assert answer["seq"] == 47
    code, out = verify(release)
    assert code == 0, out
