"""The settings' sources: one TOML config file and the environment, and where each value came from.

    found = read_sources(FIELDS, environ=os.environ, config=Path("gateway.toml"))
    found.values["database_url"], found.origins["database_url"]   # "...", "env GATEWAY_..."

The file's keys are the settings' own names (``database_url = "..."``); a secret may instead
be given as a file holding it (``anthropic_api_key_file = "/run/secrets/anthropic"``, or
``ANTHROPIC_API_KEY_FILE`` in the environment), so that it sits in no config file. A relative
path in the file is relative to the file's folder (a deployment folder moves as a whole). An
environment variable overrides the file; a keyword argument overrides both. An unknown key is
an error naming the nearest valid one, since a misspelt setting would otherwise be ignored.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gateway.errors import ConfigurationError

__all__ = ["CONFIG_ENV", "FieldSpec", "Sources", "read_sources"]

CONFIG_ENV = "GATEWAY_CONFIG"
SECRET_FILE_SUFFIX = "_file"  # noqa: S105 (a key name's ending, not a password)


@dataclass(frozen=True)
class FieldSpec:
    """What the sources need to know of one setting."""

    env: str  # its environment variable
    file_ok: bool = False  # a secret that may be given as a file (``<name>_file``, ``<ENV>_FILE``)
    path: bool = False  # a path: relative ones in the config file are relative to it
    sqlite_url: bool = False  # a database URL: a relative SQLite path is, too


@dataclass
class Sources:
    values: dict[str, object] = field(default_factory=dict)
    # Where each value came from: "config /srv/gateway/gateway.toml", "env GATEWAY_X", ...
    origins: dict[str, str] = field(default_factory=dict)
    config: Path | None = None


def read_sources(
    fields: Mapping[str, FieldSpec],
    *,
    environ: Mapping[str, str],
    config: Path | None = None,
) -> Sources:
    """The values the config file (``config``, else ``$GATEWAY_CONFIG``) and the environment
    give, the environment's winning."""
    found = Sources()
    path = config if config is not None else _env_path(environ)
    if path is not None:
        found.config = path
        _from_file(fields, path, found)
    for name, spec in fields.items():
        if environ.get(spec.env):
            found.values[name] = environ[spec.env]
            found.origins[name] = f"env {spec.env}"
        elif spec.file_ok and environ.get(spec.env + "_FILE"):
            var = spec.env + "_FILE"
            found.values[name] = _secret_from(Path(environ[var]), where=f"{var}")
            found.origins[name] = f"env {var} ({environ[var]})"
    return found


def _env_path(environ: Mapping[str, str]) -> Path | None:
    value = environ.get(CONFIG_ENV)
    return Path(value) if value else None


def _from_file(fields: Mapping[str, FieldSpec], path: Path, found: Sources) -> None:
    table = _read_toml(path)
    base = path.resolve().parent
    allowed = list(fields) + [n + SECRET_FILE_SUFFIX for n, s in fields.items() if s.file_ok]
    for key, value in table.items():
        if key not in allowed:
            near = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            raise ConfigurationError(
                f"{path}: unknown setting {key!r}"
                + (f"; did you mean {near[0]!r}?" if near else "."),
                hint="The valid names are the settings' own (`gateway config show` lists "
                "them); a secret may be given as NAME_file.",
            )
        origin = f"config {path}"
        if key in fields:
            spec = fields[key]
            if spec.path and isinstance(value, str):
                value = str(base / value)
            elif spec.sqlite_url and isinstance(value, str):
                value = _anchored_sqlite(value, base)
            found.values[key] = value
            found.origins[key] = origin
            continue
        name = key.removesuffix(SECRET_FILE_SUFFIX)
        if name in found.values:
            raise ConfigurationError(
                f"{path}: both {name!r} and {key!r} are set.",
                hint="Give the secret once: as a file path (better) or as its value.",
            )
        if not isinstance(value, str):
            raise ConfigurationError(
                f"{path}: {key!r} must be a file path (a string).",
                hint=f'Write {key} = "/run/secrets/..."',
            )
        secret_path = base / value
        found.values[name] = _secret_from(secret_path, where=f"{path}: {key}")
        found.origins[name] = f"config {path} ({key} = {secret_path})"


def _read_toml(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the config file {str(path)!r} ({exc.strerror or exc}).",
            hint=f"Check the --config flag or {CONFIG_ENV}.",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f"the config file {str(path)!r} is not valid TOML: {exc}.",
            hint="Fix the line named; `gateway init` writes a commented example.",
        ) from None


def _secret_from(path: Path, *, where: str) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigurationError(
            f"{where}: cannot read the secret file {str(path)!r} ({reason}).",
            hint="Point it at a readable file that holds the secret alone.",
        ) from None
    if not text:
        raise ConfigurationError(
            f"{where}: the secret file {str(path)!r} is empty.",
            hint="Write the secret into it, or remove the setting.",
        )
    return text


def _anchored_sqlite(url: str, base: Path) -> str:
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return url
    rest = url.removeprefix(prefix)
    if not rest or rest.startswith("/") or rest.startswith(":memory:"):
        return url
    return prefix + str(base / rest)
