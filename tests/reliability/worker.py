"""A fork server for gateway processes: imported once, then forks real processes on request.

Importing the gateway costs ~2 s of CPU; fifty crash runs from fresh interpreters would take
most of the suite's budget. This script imports once, then each ``run`` command forks
children that build their own ``Gateway`` and send requests. A child is a real process:
SIGKILL ends it mid-write exactly as it would end a service.

    $ .venv/bin/python tests/reliability/worker.py     # then one JSON command per stdin line
    {"op": "run", "name": "k1", "children": 1, "threads": 2, "kill_after": 0.4,
     "settings": {...}, "task": "compliance_review", "prompts": ["a", "b"]}

Every line written to stdout is one JSON object, written with a single ``os.write`` so lines
from several children never interleave: ``ack`` (a request returned: request_id, seq,
cached, request_hash), ``error`` (a GatewayError: its class, never its text), ``exit``
(a child ended: exit status, or killed), ``batch`` (every child of one command ended).
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import sqlite3  # noqa: F401  loaded before a child drops privileges (the venv is root's)
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# The gateway imports the SDK on its first Claude request (~1-2 s); loading it here, before any
# fork, keeps every child's kill window on the request path instead of inside an import.
import gateway.providers.anthropic  # noqa: F401
from gateway import Gateway, GatewayError, Settings
from gateway.logging import configure_logging


def emit(**record: Any) -> None:
    os.write(1, (json.dumps(record) + "\n").encode())


def child(cmd: dict[str, Any], index: int) -> None:
    """One gateway process: ``threads`` threads share one Gateway and split the prompts."""
    name = f"{cmd['name']}.{index}"
    # Log lines go to stderr (the test keeps it in a file); stdout carries only our records.
    configure_logging(level=cmd.get("log_level", "WARNING"))
    if cmd.get("fsize_limit"):
        # "Disk full": writes past the limit fail with EFBIG instead of killing the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = int(cmd["fsize_limit"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    if cmd.get("as_nobody"):
        # Root ignores file modes; an unprivileged user meets a read-only database for real.
        os.setgid(65534)
        os.setuid(65534)
    rng = random.Random(cmd.get("seed", 0) * 1000 + index)
    prompts: list[str] = list(cmd["prompts"])
    if cmd.get("shuffle"):
        rng.shuffle(prompts)
    settings = dict(cmd["settings"])
    if cmd.get("base_urls"):  # one upstream per child, so each can count its own calls
        settings["anthropic_base_url"] = cmd["base_urls"][index]
    try:
        gw = Gateway(Settings(**settings))
    except GatewayError as exc:
        emit(event="error", child=name, error=type(exc).__name__, stage="open")
        return
    with gw:

        def work(part: list[str]) -> None:
            for prompt in part:
                try:
                    r = gw.complete(cmd["task"], prompt, caller=cmd.get("caller", name))
                except GatewayError as exc:
                    emit(event="error", child=name, error=type(exc).__name__)
                    continue
                emit(
                    event="ack",
                    child=name,
                    request_id=r.request_id,
                    seq=r.seq,
                    cached=r.cached,
                    request_hash=r.request_hash,
                )

        threads = int(cmd.get("threads", 1))
        if cmd.get("overlap"):
            parts = [prompts[t:] + prompts[:t] for t in range(threads)]  # same set, rotated
        else:
            parts = [prompts[t::threads] for t in range(threads)]
        workers = [threading.Thread(target=work, args=(p,)) for p in parts]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


def run(cmd: dict[str, Any]) -> None:
    pids: dict[int, str] = {}
    for index in range(int(cmd.get("children", 1))):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                child(cmd, index)
            except BaseException as exc:  # report, then leave without running parent cleanup
                emit(event="crash", child=f"{cmd['name']}.{index}", error=repr(exc)[:300])
                code = 1
            os._exit(code)
        pids[pid] = f"{cmd['name']}.{index}"
    kill_after = cmd.get("kill_after")
    if kill_after is not None:
        time.sleep(float(kill_after))
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    for pid, name in pids.items():
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        emit(event="exit", child=name, killed=killed, code=os.waitstatus_to_exitcode(status))
    emit(event="batch", name=cmd["name"])


def main() -> None:
    sys.stdout.flush()  # nothing buffered may be duplicated into a forked child
    for line in sys.stdin:
        if line.strip():
            run(json.loads(line))


if __name__ == "__main__":
    main()
