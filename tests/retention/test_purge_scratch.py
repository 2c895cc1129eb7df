"""A purge killed mid-run leaves no scratch file behind (its plan held request ids and
digests in a ``/tmp/gateway-erasure-*`` folder that nothing removed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway import Gateway, Settings
from gateway.evidence import Erasing
from tests.retention.conftest import LATER

# Builds the erasure plan over the log and is killed (SIGKILL: no handler, no cleanup) while
# deciding the first request, that is with the plan's scratch database open.
KILLED_MID_PLAN = """
import os, signal, sys
from audit import AuditStore
from gateway.evidence._erasure_plan import ErasurePlan

with AuditStore.open(sys.argv[1], "os") as store:
    ErasurePlan.build(store, lambda ref: os.kill(os.getpid(), signal.SIGKILL))
"""


@pytest.mark.slow
def test_a_purge_killed_mid_plan_leaves_no_scratch_file(
    gw: Gateway, settings: Settings, erasing: Erasing, tmp_path: Path
) -> None:
    gw.complete("compliance_review", "Is clause 4 a conflict of interest?")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "SQLITE_TMPDIR": str(scratch)}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MID_PLAN, settings.database_url],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr.decode()
    assert list(scratch.iterdir()) == []
    report = erasing.purge(actor="ops", now=LATER)  # the next run plans and erases as ever
    assert report.requests_erased == 1
