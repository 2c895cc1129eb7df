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


def test_init_writes_a_deployment_whose_settings_work(tmp_path: Path) -> None:
    folder = tmp_path / "gateway"
    made = cli({"GATEWAY_POLICY_DIR": str(ROOT / "policies")}, "init", str(folder))
    assert made.exit_code == 0, made.output

    for key in ("record", "checkpoint"):
        private = folder / "keys" / f"{key}.key"
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
        public = (folder / "keys" / f"{key}.key.pub").read_text()
        assert Signer.from_file(private).public_key in public
    config = folder / "gateway.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert "gateway db upgrade" in (folder / "NEXT-STEPS.md").read_text()

    # The file alone configures the deployment, its relative paths anchored at its folder.
    env = {"GATEWAY_CONFIG": str(config), "GATEWAY_POLICY_DIR": ""}
    shown = cli(env, "config", "show", "--format", "json")
    assert shown.exit_code == 0, shown.output
    sources = {s["name"]: s for s in json.loads(shown.stdout)["settings"]}
    assert sources["policy_dir"]["value"] == str(folder / "policies")
    assert sources["database_url"]["value"] == f"sqlite:///{folder / 'audit.db'}"
    assert sources["checkpoint_key"]["value"] == "***"
    assert "checkpoint_key_file" in sources["checkpoint_key"]["source"]
    assert sources["durability"]["source"] == "default"
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
