"""With approvals required and no approver keys pinned, the gateway does not start.

Unpinned, any key signing under any name counts, so one person holding two approver keys
makes "four eyes" alone (tests/policy/test_approver_pins.py shows the attack). `ask`,
`serve` and `Gateway.from_env` refuse in one line, unless the setting named unsafe says to
start anyway, and then warn.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from structlog.testing import capture_logs

from audit import AuditStore
from audit.store.signing import Signer
from gateway import Gateway, Settings
from gateway.cli import main
from gateway.errors import ConfigurationError
from tests.policy.conftest import VALID

GATEWAY = Path(sys.executable).with_name("gateway")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).close()
    folder = tmp_path / "policies"
    (folder / "prompts").mkdir(parents=True)
    (folder / "task_a.toml").write_text(VALID, encoding="utf-8")
    (folder / "prompts" / "system.md").write_text("Answer briefly.", encoding="utf-8")
    return {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_POLICY_DIR": str(folder),
        "GATEWAY_REQUIRE_APPROVALS": "2",
        "GATEWAY_DURABILITY": "os",
    }


def test_the_library_refuses_to_start_with_unpinned_approvals(env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Gateway(Settings.from_env(env), offline=True)
    assert "no approver keys are pinned" in refused.value.message
    assert "\n" not in refused.value.message
    assert "GATEWAY_UNSAFE_UNPINNED_APPROVERS" in (refused.value.hint or "")


def test_ask_refuses_in_one_line(env: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["ask", "task_a", "The reviewer reads the", "--offline",
                                       "--caller", "desk"], env=env)  # fmt: skip
    assert result.exit_code != 0
    assert "no approver keys are pinned" in result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_serve_refuses_before_it_listens(env: dict[str, str]) -> None:
    done = subprocess.run(
        [str(GATEWAY), "serve", "--port", "0"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "no approver keys are pinned" in done.stderr
    assert "serving on" not in done.stderr and "Traceback" not in done.stderr


def test_pinned_approvers_or_the_unsafe_setting_start(env: dict[str, str]) -> None:
    public = Signer.from_text(secrets.token_hex(32)).public_key
    pinned = {**env, "GATEWAY_TRUSTED_APPROVERS": f"alice={public}"}
    # Both get past the pins to the count itself: task_a has no approvals yet, so it is
    # refused (the gateway starts).
    with Gateway(Settings.from_env(pinned), offline=True) as gw:
        assert gw.policies.withheld() == ["task_a"]
    unsafe = {**env, "GATEWAY_UNSAFE_UNPINNED_APPROVERS": "1"}
    with capture_logs() as logs, Gateway(Settings.from_env(unsafe), offline=True) as gw:
        assert gw.policies.withheld() == ["task_a"]
    warned = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert warned == ["approvals_unpinned", "task_refused_unapproved"]
