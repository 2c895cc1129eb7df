"""How long the CLI takes to start: `gateway --help`, `gateway audit list` (one recorded
request; and a selection that matches none, which names the known tasks), `gateway audit show
ID` and `gateway policy review`, against the interpreter alone and the SDK's import, in the
same run, and against what reading the store imports of its libraries (the floors). The log
holds one request, recorded first with the offline model (`gateway ask
offline_demo`).

    .venv/bin/python bench/cli_start_bench.py [--runs 5] [--pythonpath DIR]

The code under test is byte-compiled first (``compileall``, as ``make setup`` and pip do):
this machine sets PYTHONDONTWRITEBYTECODE, and without the ``.pyc`` files every command
compiles the project's modules from source again (about 0.1 s of a start).

Each command runs ``--runs`` times as a fresh process; the figures are medians of wall time
and of the process's CPU time (user + system, from ``getrusage``). On a shared, loaded host
the CPU time is the steadier figure. ``--pythonpath`` runs another checkout's code (a
baseline) with this interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        args, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pythonpath", type=Path, default=ROOT)
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cli-start-"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")},
        "PYTHONPATH": str(options.pythonpath),
        "GATEWAY_DATABASE_URL": f"sqlite:///{folder / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(ROOT / "policies"),
    }
    python = sys.executable
    packages = [str(options.pythonpath / p) for p in ("gateway", "audit")]
    subprocess.run([python, "-m", "compileall", "-q", *packages], check=True)
    subprocess.run(
        [python, "-m", "gateway", "db", "upgrade"],
        env=env,
        cwd=folder,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    gateway = [python, "-m", "gateway"]
    subprocess.run(
        [*gateway, "ask", "offline_demo", "What is a sanctions screen?"],
        env=env,
        cwd=folder,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    listed = subprocess.run(
        [*gateway, "audit", "list", "--format", "json"],
        env=env,
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    )
    request_id = json.loads(listed.stdout)[0]["request_id"]
    cases = {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import anthropic'": [python, "-c", "import anthropic"],
        # What reading the store imports of its libraries: click, SQLAlchemy Core (the schema
        # is Core tables) and pydantic with its BaseModel (the event types, the settings; a
        # bare `import pydantic` loads its models lazily, so it is not the cost). Then the
        # same without pydantic: what a read path without pydantic could reach; and without
        # SQLAlchemy (the standard library's sqlite3): what a SQLite read path of its own
        # could reach. The last is the floor before the Core schema (the ORM's declarative
        # models), for comparison.
        "floor: click + sqlalchemy + pydantic.BaseModel": [
            python,
            "-c",
            "import click, sqlalchemy; from pydantic import BaseModel",
        ],
        "floor without pydantic: click + sqlalchemy": [python, "-c", "import click, sqlalchemy"],
        "floor without sqlalchemy: click + sqlite3 + pydantic.BaseModel": [
            python,
            "-c",
            "import click, sqlite3; from pydantic import BaseModel",
        ],
        "old floor: click + sqlalchemy.orm + pydantic": [
            python,
            "-c",
            "import click, sqlalchemy.orm, pydantic",
        ],
        "gateway --help": [*gateway, "--help"],
        "gateway audit list": [*gateway, "audit", "list"],
        "gateway audit list --task none": [*gateway, "audit", "list", "--task", "none"],
        "gateway audit show ID": [*gateway, "audit", "show", request_id],
        "gateway policy review": [*gateway, "policy", "review"],
    }
    print(f"code: {options.pythonpath}; {options.runs} runs each; load {os.getloadavg()[0]:.1f}")
    print("| command | wall median (s) | CPU median (s) | CPU / SDK import |")
    print("|---|---|---|---|")
    sdk_cpu = None
    for name, args in cases.items():
        # cwd: the temporary folder, so that `-m gateway` finds the code on PYTHONPATH
        runs = [_run(args, env, folder) for _ in range(options.runs)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        if name.startswith("python -c 'import anthropic'"):
            sdk_cpu = cpu
        ratio = f"{cpu / sdk_cpu:.2f}" if sdk_cpu else "-"
        print(f"| `{name}` | {wall:.2f} | {cpu:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
