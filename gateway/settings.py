"""Settings, built once at the entry point and passed down.

    settings = Settings.from_env()          # reads the environment once
    settings = Settings(policy_dir=Path("policies"), database_url="sqlite:///audit.db")

An unusable value, from the environment or a keyword argument, raises ConfigurationError.

Nothing else in the library reads the environment. The API key and checkpoint key are
``SecretStr`` so that they never appear in a repr, a log line or an error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from gateway.errors import ConfigurationError

DEFAULT_DATABASE_URL = "sqlite:///gateway-audit.db"
DEFAULT_POLICY_DIR = Path("policies")


class Durability(StrEnum):
    # fsync survives a power cut (SQLite synchronous=FULL, PostgreSQL synchronous_commit=on)
    FSYNC = "fsync"
    OS = "os"  # survives a process crash: SQLite synchronous=NORMAL


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    policy_dir: Path = DEFAULT_POLICY_DIR
    database_url: str = DEFAULT_DATABASE_URL
    durability: Durability = Durability.FSYNC
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    checkpoint_key: SecretStr | None = None
    catalog_override: Path | None = None
    request_timeout_s: float = Field(default=600.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    retry_after_cap_s: float = Field(default=60.0, ge=0)
    retry_backoff_base_s: float = Field(default=0.5, ge=0)

    def __init__(self, **values: object) -> None:
        # Keyword settings (Settings(...), Gateway(durability=...)) are checked like the
        # environment's: an unusable value is a ConfigurationError, never pydantic's own.
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise _unusable(exc) from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        mapping = {
            "GATEWAY_POLICY_DIR": "policy_dir",
            "GATEWAY_DATABASE_URL": "database_url",
            "GATEWAY_DURABILITY": "durability",
            "GATEWAY_CHECKPOINT_KEY": "checkpoint_key",
            "GATEWAY_CATALOG_OVERRIDE": "catalog_override",
            "ANTHROPIC_API_KEY": "anthropic_api_key",
            "ANTHROPIC_BASE_URL": "anthropic_base_url",
        }
        for var, field in mapping.items():
            if env.get(var):
                values[field] = env[var]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _unusable(exc: ValidationError) -> ConfigurationError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return ConfigurationError(
        f"setting {where!r} is not usable: {first['msg']}.",
        hint="Check the matching GATEWAY_* environment variable or keyword argument.",
    )
