"""Every replay mode runs in flat memory: `gateway replay --all` in verify, --model and
report form, on a log of 1,000 and of 10,000 requests, each in a fresh process under
tracemalloc; the peaks must agree within a few MB. (Before the rows were spooled to disk,
--format json, --report and --model held every row: 153 -> 524 MB of RSS at 2,000 -> 20,000
requests for verify --format json.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.replay_log import ROOT, generate

MB = 1024 * 1024
MODES = {
    "verify_json_report": ["--verify", "--format", "json", "--report", "{work}/report.html"],
    "model_table": ["--model", "claude-opus-4-7"],
    "model_json": ["--model", "claude-opus-4-7", "--format", "json"],
}

# Runs in the child: the command's tracemalloc peak, in bytes, on stderr's last line.
CHILD = """
import io, sys, tracemalloc
from gateway.cli import main

class Sink(io.TextIOBase):
    def write(self, text):
        return len(text)

tracemalloc.start()
sys.stdout = Sink()
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    sys.stdout = sys.__stdout__
    print(tracemalloc.get_traced_memory()[1], file=sys.stderr)
"""


def _peak(folder: Path, options: list[str]) -> int:
    env = {
        "GATEWAY_DATABASE_URL": f"sqlite:///{folder / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(ROOT / "policies"),
        "GATEWAY_DURABILITY": "os",
        "PATH": "/usr/bin:/bin",
    }
    args = [o.replace("{work}", str(folder)) for o in options]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "replay", "--all", "--operator", "test", *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stderr.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_replay_mode_uses_the_same_memory_on_a_log_ten_times_larger(
    tmp_path: Path,
) -> None:
    logs = {}
    for n in (1_000, 10_000):
        logs[n] = tmp_path / f"log-{n}"
        logs[n].mkdir()
        generate(logs[n], n)
    grown = {}
    for name, options in MODES.items():
        small, large = _peak(logs[1_000], options), _peak(logs[10_000], options)
        grown[name] = f"{small / MB:.1f} -> {large / MB:.1f} MB"
        assert (large - small) / MB < 3, grown
    print(json.dumps(grown))
