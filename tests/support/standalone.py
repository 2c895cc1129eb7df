"""Run the shipped standalone verifier as an auditor would: its own process, without the project.

    code, report = run_standalone(tmp_path, "export", export_file, "--record-key", key_file)

The verifier is copied alone into a folder and run with ``python -I`` (no PYTHONPATH, no
user site) from there; an import hook refuses ``gateway`` and ``audit`` in that process, so
a verifier that reached for the project (which the test environment has installed) would
fail rather than pass on borrowed code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VERIFIER = REPO / "verifier" / "verify_evidence.py"

_RUNNER = """
import runpy, sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("gateway", "audit", "tests"):
            raise ImportError("the standalone verifier may not import " + name)
sys.meta_path.insert(0, Refuse())
sys.argv = ["verify_evidence.py", *sys.argv[1:]]
runpy.run_path("verify_evidence.py", run_name="__main__")
"""


def run_standalone(folder: Path, *args: str | Path) -> tuple[int, dict[str, Any]]:
    """Exit code and JSON report of ``verify_evidence.py ARGS --format json``, run alone."""
    home = folder / "auditor"
    home.mkdir(exist_ok=True)
    shutil.copyfile(VERIFIER, home / "verify_evidence.py")
    done = subprocess.run(
        [sys.executable, "-I", "-c", _RUNNER, *map(str, args), "--format", "json"],
        cwd=home, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ""},
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)
