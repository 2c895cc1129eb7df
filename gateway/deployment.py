"""A deployment folder to start from: policies, keys, the settings, and what is left to do.

    made = init_deployment(Path("/srv/gateway"), policies=Path("policies"))
    made.env_file            # /srv/gateway/gateway.env: the settings it chose, one a line

It writes into a folder that does not exist or is empty, and refuses anything else: a
second run changes nothing (a key file is never overwritten). The keys are new
(mode 0600) with their public halves beside them; where each goes is in NEXT-STEPS.md.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

from gateway.errors import InputError
from gateway.keys import KeyKind, NewKey, new_key_file

__all__ = ["Deployment", "init_deployment"]

ENV_FILE = "gateway.env"
NEXT_STEPS = "NEXT-STEPS.md"


class Deployment(NamedTuple):
    folder: Path
    env_file: Path
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
    env_file = folder / ENV_FILE
    env_file.write_text(_env_text(folder, record), encoding="utf-8")
    env_file.chmod(0o600)
    steps = folder / NEXT_STEPS
    steps.write_text(_next_steps(folder, record, checkpoint), encoding="utf-8")
    return Deployment(folder, env_file, steps, record, checkpoint)


def _env_text(folder: Path, record: NewKey) -> str:
    return (
        "# gateway settings written by `gateway init`; load with `set -a; . ./gateway.env`.\n"
        "# Every GATEWAY_* variable is listed in docs/server.md and gateway/settings.py.\n"
        f"GATEWAY_POLICY_DIR={folder / 'policies'}\n"
        "# The audit database: SQLite here to start; PostgreSQL for more than one instance\n"
        "# (postgresql+psycopg://gateway@db/audit?sslmode=verify-full&sslrootcert=...).\n"
        f"GATEWAY_DATABASE_URL=sqlite:///{folder / 'audit.db'}\n"
        f"GATEWAY_RECORD_KEY_FILE={record.path}\n"
        "# The checkpoint key is read as text:\n"
        '# GATEWAY_CHECKPOINT_KEY="$(cat keys/checkpoint.key)"\n'
        "# ANTHROPIC_API_KEY comes from your secret store, never from this file.\n"
    )


def _next_steps(folder: Path, record: NewKey, checkpoint: NewKey) -> str:
    return f"""# Next steps for the gateway in {folder}

1. Move the private keys into a secret store or KMS (keys/*.key, mode 0600): the record key
   ({record.key_id}) signs every audit event; the checkpoint key ({checkpoint.key_id})
   signs checkpoints and receipts. Keep neither on the database host.
2. Give the public keys to the auditors: keys/record.key.pub (GATEWAY_TRUSTED_KEYS_FILE for
   readers and other instances) and keys/checkpoint.key.pub.
3. Load the settings and create the audit schema:
       set -a; . ./gateway.env; set +a
       gateway db upgrade
   (PostgreSQL: `gateway db grant ROLE` for the gateway's, the reviewers' and the readers'
   roles; see docs/security.md.)
4. Review the policies in policies/ (`gateway policy review`) and issue a caller key for each
   calling service: `gateway keys create --caller NAME`.
5. Serve: `gateway serve --tls-cert ... --tls-key ...` (docs/server.md, "TLS").
"""
