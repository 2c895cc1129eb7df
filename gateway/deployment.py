"""A deployment folder to start from: policies, keys, the settings, and what is left to do.

    made = init_deployment(Path("/srv/gateway"), policies=Path("policies"))
    made.config_file         # /srv/gateway/gateway.toml: the settings it chose, commented

It writes into a folder that does not exist or is empty, and refuses anything else: a
second run changes nothing (a key file is never overwritten). The keys are new
(mode 0600) with their public halves beside them; where each goes is in NEXT-STEPS.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import NamedTuple

from gateway.errors import InputError
from gateway.keys import KeyKind, NewKey, new_key_file
from gateway.settings import FIELDS, Settings

__all__ = ["Deployment", "config_text", "init_deployment"]

CONFIG_FILE = "gateway.toml"
NEXT_STEPS = "NEXT-STEPS.md"


class Deployment(NamedTuple):
    folder: Path
    config_file: Path
    next_steps: Path
    record_key: NewKey
    checkpoint_key: NewKey


def init_deployment(folder: Path, *, policies: Path) -> Deployment:
    folder = folder.resolve()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError(
            f"{str(folder)!r} already exists and is not an empty folder; nothing was written.",
            hint="Choose a new folder: `gateway init` never overwrites a deployment or its keys.",
        )
    if not policies.is_dir():
        raise InputError(
            f"the policy folder {str(policies)!r} does not exist.",
            hint="Set GATEWAY_POLICY_DIR to the policies to start from.",
        )
    (folder / "keys").mkdir(parents=True, exist_ok=True)
    folder.chmod(0o750)
    (folder / "keys").chmod(0o700)
    shutil.copytree(policies, folder / "policies")
    record = new_key_file(KeyKind.RECORD, folder / "keys" / "record.key")
    checkpoint = new_key_file(KeyKind.CHECKPOINT, folder / "keys" / "checkpoint.key")
    config_file = folder / CONFIG_FILE
    config_file.write_text(config_text(), encoding="utf-8")
    config_file.chmod(0o600)
    steps = folder / NEXT_STEPS
    steps.write_text(_next_steps(folder, record, checkpoint), encoding="utf-8")
    return Deployment(folder, config_file, steps, record, checkpoint)


# What `gateway init` sets; relative paths are relative to the config file's folder.
_CHOSEN = {
    "policy_dir": "policies",
    # SQLite to start; PostgreSQL for more than one instance (docs/deployment.md):
    # postgresql+psycopg://gateway@db/audit?sslmode=verify-full&sslrootcert=...
    "database_url": "sqlite:///audit.db",
    "record_key_file": "keys/record.key",
    "checkpoint_key_file": "keys/checkpoint.key",
}


def config_text() -> str:
    """A commented gateway.toml: the settings init chose, every other one commented out with
    its default and environment variable."""
    lines = [
        "# The gateway's settings, written by `gateway init`. Use it with",
        "#   gateway --config gateway.toml ...   or   export GATEWAY_CONFIG=$PWD/gateway.toml",
        "# An environment variable (named beside each setting) overrides the value here;",
        "# `gateway config show` prints the effective settings and where each came from.",
        '# A secret may be a file instead: NAME_file = "/run/secrets/..." (a secret store in',
        "# production). ANTHROPIC_API_KEY comes from your secret store, never from this file.",
        "",
    ]
    for name, value in _CHOSEN.items():
        lines.append(f"{name} = {_toml(value)}")
    lines.append("")
    for name, spec in FIELDS.items():
        if name in _CHOSEN or f"{name}_file" in _CHOSEN:
            continue
        default = Settings.model_fields[name].default
        shown = "" if default is None else _toml(default)
        lines.append(f"# {name} = {shown}".rstrip() + f"    # {spec.env}")
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}"
    return json.dumps(str(value))


def _next_steps(folder: Path, record: NewKey, checkpoint: NewKey) -> str:
    return f"""# Next steps for the gateway in {folder}

1. Move the private keys into a secret store or KMS (keys/*.key, mode 0600): the record key
   ({record.key_id}) signs every audit event; the checkpoint key ({checkpoint.key_id})
   signs checkpoints and receipts. Keep neither on the database host.
2. Give the public keys to the auditors: keys/record.key.pub (GATEWAY_TRUSTED_KEYS_FILE for
   readers and other instances) and keys/checkpoint.key.pub.
3. Point the gateway at its settings and create the audit schema:
       export GATEWAY_CONFIG={folder / CONFIG_FILE}
       gateway config show
       gateway db upgrade
   (PostgreSQL: `gateway db grant ROLE` for the gateway's, the reviewers' and the readers'
   roles; see docs/security.md.)
4. Review the policies in policies/ (`gateway policy review`) and issue a caller key for each
   calling service: `gateway keys create --caller NAME`.
5. Serve: `gateway serve --tls-cert ... --tls-key ...` (docs/server.md, "TLS").
"""
