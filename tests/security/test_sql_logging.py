"""A host that turns SQLAlchemy's logging up sees statements, never the values bound to them:
those are prompt and answer text, which belong in the audit database only (invariant 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the gateway in a host process

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The reviewer reads the ledger of ACME-SECRET-7731"

_HOST = """
import logging, sys
logging.basicConfig(level=logging.DEBUG)
logging.getLogger("sqlalchemy").setLevel(logging.DEBUG)
from gateway import Gateway
with Gateway(policy_dir=sys.argv[1], database_url=sys.argv[2], offline=True) as gw:
    gw.complete("compliance_review", sys.argv[3], caller="tests")
with Gateway(policy_dir=sys.argv[1], database_url=sys.argv[2], offline=True) as gw:
    assert gw.complete("compliance_review", sys.argv[3], caller="tests").cached  # a read
"""


def test_sql_logging_shows_no_bound_values(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _HOST,
            str(ROOT / "policies"),
            f"sqlite:///{tmp_path / 'a.db'}",
            PROMPT,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    assert "INSERT INTO" in done.stderr  # the host does see SQLAlchemy's statement log
    assert "ACME-SECRET-7731" not in done.stderr and "ACME-SECRET-7731" not in done.stdout
