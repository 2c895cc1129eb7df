"""`gateway init DIR`: a deployment folder whose settings work as written, never overwritten."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from click.testing import CliRunner, Result

from audit.store.signing import Signer
from gateway.cli import main

ROOT = Path(__file__).resolve().parents[1]


def cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def _settings(env_file: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines())
    return {k: v for k, v in (p for p in pairs if len(p) == 2) if not k.startswith("#")}


def test_init_writes_a_deployment_whose_settings_work(tmp_path: Path) -> None:
    folder = tmp_path / "gateway"
    made = cli({"GATEWAY_POLICY_DIR": str(ROOT / "policies")}, "init", str(folder))
    assert made.exit_code == 0, made.output

    for key in ("record", "checkpoint"):
        private = folder / "keys" / f"{key}.key"
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
        public = (folder / "keys" / f"{key}.key.pub").read_text()
        assert Signer.from_file(private).public_key in public
    assert stat.S_IMODE((folder / "gateway.env").stat().st_mode) == 0o600
    assert "gateway db upgrade" in (folder / "NEXT-STEPS.md").read_text()

    env = _settings(folder / "gateway.env")
    assert set(env) == {"GATEWAY_POLICY_DIR", "GATEWAY_DATABASE_URL", "GATEWAY_RECORD_KEY_FILE"}
    assert cli(env, "db", "upgrade").exit_code == 0
    assert cli(env, "policy", "review").exit_code == 0
    created = cli(env, "keys", "create", "--caller", "payments-svc", "--format", "json")
    assert created.exit_code == 0, created.output
    assert json.loads(created.stdout)["seq"] >= 1


def test_init_refuses_a_folder_in_use_and_changes_nothing(tmp_path: Path) -> None:
    env = {"GATEWAY_POLICY_DIR": str(ROOT / "policies")}
    folder = tmp_path / "gateway"
    assert cli(env, "init", str(folder)).exit_code == 0
    key = (folder / "keys" / "record.key").read_text()
    again = cli(env, "init", str(folder))
    assert again.exit_code == 2
    assert "not an empty folder" in again.stderr and "Traceback" not in again.output
    assert (folder / "keys" / "record.key").read_text() == key
