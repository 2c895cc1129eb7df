"""One config file (gateway.toml): every setting, the environment over it, secrets as files,
unknown keys named with the nearest valid one, and `gateway config show` saying where each
value came from without showing a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.errors import ConfigurationError
from gateway.settings import FIELDS, Settings, explain_settings

SECRET = "sk-ant-config-file-secret-0123456789"


def cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def test_every_setting_has_an_environment_variable_and_a_config_key() -> None:
    assert set(FIELDS) == set(Settings.model_fields)
    assert len({spec.env for spec in FIELDS.values()}) == len(FIELDS)
    # docs/configuration.md's naming rule, and its three exceptions.
    odd = {n: s.env for n, s in FIELDS.items() if s.env != "GATEWAY_" + n.upper()}
    assert odd == {
        "anthropic_api_key": "ANTHROPIC_API_KEY",
        "anthropic_base_url": "ANTHROPIC_BASE_URL",
        "server_otel": "GATEWAY_OTEL",
    }


def test_the_file_sets_values_and_the_environment_overrides_it(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('max_attempts = 2\ndurability = "os"\npolicy_dir = "pol"\n')
    explained = explain_settings({"GATEWAY_DURABILITY": "fsync"}, config=config)
    assert explained.settings.max_attempts == 2
    assert explained.settings.durability == "fsync"
    assert explained.settings.policy_dir == tmp_path / "pol"  # relative to the file
    assert explained.origins["max_attempts"] == f"config {config}"
    assert explained.origins["durability"] == "env GATEWAY_DURABILITY"
    assert explained.origins["request_timeout_s"] == "default"


def test_the_config_file_is_found_by_environment_variable_and_by_flag(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text("max_attempts = 3\n")
    by_env = explain_settings({"GATEWAY_CONFIG": str(config)})
    assert by_env.settings.max_attempts == 3 and by_env.config == config
    shown = cli({"GATEWAY_CONFIG": ""}, "--config", str(config), "config", "show")
    assert shown.exit_code == 0, shown.output
    line = next(x for x in shown.stdout.splitlines() if x.startswith("max_attempts"))
    assert "3" in line and f"config {config}" in line


def test_an_unknown_key_names_the_nearest_valid_one(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('databse_url = "sqlite:///x.db"\n')
    with pytest.raises(ConfigurationError, match="did you mean 'database_url'"):
        Settings.from_env({}, config=config)
    result = cli({"GATEWAY_CONFIG": str(config)}, "config", "show")
    assert result.exit_code == 2
    assert "databse_url" in result.stderr and "database_url" in result.stderr
    assert "Traceback" not in result.output


def test_a_secret_given_as_a_file_is_read_and_never_shown(tmp_path: Path) -> None:
    (tmp_path / "anthropic.key").write_text(SECRET + "\n")
    config = tmp_path / "gateway.toml"
    config.write_text('anthropic_api_key_file = "anthropic.key"\n')
    settings = Settings.from_env({}, config=config)
    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == SECRET
    for fmt in ("text", "json"):
        shown = cli({"GATEWAY_CONFIG": str(config)}, "config", "show", "--format", fmt)
        assert shown.exit_code == 0, shown.output
        assert SECRET not in shown.output
    rows = json.loads(shown.stdout)["settings"]
    row = next(r for r in rows if r["name"] == "anthropic_api_key")
    assert row["value"] == "***" and "anthropic.key" in row["source"]


def test_a_secret_file_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("metrics-token-value")
    settings = Settings.from_env({"GATEWAY_SERVER_METRICS_TOKEN_FILE": str(tmp_path / "token")})
    assert settings.server_metrics_token is not None
    assert settings.server_metrics_token.get_secret_value() == "metrics-token-value"


def test_a_database_password_is_masked_in_config_show(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('database_url = "postgresql+psycopg://app:s3cretpw@db/audit"\n')
    shown = cli({"GATEWAY_CONFIG": str(config)}, "config", "show")
    assert shown.exit_code == 0, shown.output
    assert "s3cretpw" not in shown.output and "app:***@db/audit" in shown.output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_attempts = \n", "not valid TOML"),
        ('checkpoint_key_file = "missing.key"\n', "cannot read the secret file"),
        ('checkpoint_key = "a"\ncheckpoint_key_file = "k"\n', "both"),
        ("max_attempts = 0\n", "max_attempts"),
    ],
)
def test_a_bad_config_file_is_one_line_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(text)
    result = cli({"GATEWAY_CONFIG": str(config)}, "config", "show")
    assert result.exit_code == 2, result.output
    assert expected in result.stderr and "Traceback" not in result.output


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    result = cli({"GATEWAY_CONFIG": str(tmp_path / "nope.toml")}, "config", "show")
    assert result.exit_code == 2
    assert "nope.toml" in result.stderr
