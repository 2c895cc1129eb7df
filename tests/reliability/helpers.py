"""Shared helpers for the reliability suite: the fork server, policy copies, audit checks.

with ForkServer(tmp_path / "worker.log") as server:
    records = server.run({"name": "a", "settings": settings_for(...), ...})
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from audit import AuditStore, EventKind, list_requests
from audit.canonical import digest
from audit.verify import verify_log
from gateway._vocabulary import request_status

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_POLICIES = ROOT / "policies"
WORKER = Path(__file__).with_name("worker.py")
PYTHON = ROOT / ".venv" / "bin" / "python"
GATEWAY_CLI = ROOT / ".venv" / "bin" / "gateway"


def copy_policies(target: Path) -> Path:
    shutil.copytree(SHIPPED_POLICIES, target)
    return target


RELIABILITY_RECORD_KEY = "5a" * 32  # one key for every gateway of a scenario


def settings_for(url: str, base_url: str, policy_dir: Path, **extra: Any) -> dict[str, Any]:
    """Settings as JSON for a forked gateway (durability os: process crashes, not power cuts)."""
    values: dict[str, Any] = {
        "policy_dir": str(policy_dir),
        "database_url": url,
        "anthropic_api_key": "sk-ant-reliability-test",
        "anthropic_base_url": base_url,
        "durability": "os",
        "retry_backoff_base_s": 0.01,
    }
    if url.startswith("postgresql"):
        # PostgreSQL has no folder to keep a record key beside it: it is configured.
        values["record_key"] = RELIABILITY_RECORD_KEY
    values.update(extra)
    return values


class ForkServer:
    """``worker.py`` started once; ``run`` sends one command and collects its records."""

    def __init__(self, log_path: Path) -> None:
        self._log = log_path.open("ab")
        self._proc = subprocess.Popen(
            [str(PYTHON), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=ROOT,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._lines.put(json.loads(raw))
        self._lines.put(None)

    def run(self, command: dict[str, Any], timeout: float = 120.0) -> list[dict[str, Any]]:
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(command) + "\n").encode())
        self._proc.stdin.flush()
        records: list[dict[str, Any]] = []
        while True:
            record = self._lines.get(timeout=timeout)
            if record is None:
                raise RuntimeError(f"the fork server exited; see {self._log.name}")
            if record.get("event") == "batch" and record.get("name") == command["name"]:
                return records
            records.append(record)

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        finally:
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            self._log.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True)
class LogState:
    """What a finished run left in the audit log, gathered through the public API."""

    verified: bool
    defects: tuple[str, ...]
    head_seq: int
    statuses: dict[str, str]  # request_id -> list status
    kinds: dict[str, tuple[str, ...]]  # request_id -> event kinds in seq order
    seqs: dict[str, tuple[int, ...]]
    intent_bodies: frozenset[str]  # digests of the bytes every REQUEST event recorded as sent
    request_hashes: dict[str, str | None]

    def outcome_counts(self) -> Counter[str]:
        return Counter(self.statuses.values())


def log_state(url: str) -> LogState:
    with AuditStore.open(url, durability="os") as store:
        report = verify_log(store)
        rows = list_requests(store, status=request_status, limit=None)
        kinds: dict[str, list[str]] = {}
        seqs: dict[str, list[int]] = {}
        hashes: dict[str, str | None] = {}
        bodies: set[str] = set()
        for event in store.iter_events():
            kinds.setdefault(event.request_id, []).append(event.kind.value)
            seqs.setdefault(event.request_id, []).append(event.seq)
            hashes.setdefault(event.request_id, event.request_hash)
            if event.kind == EventKind.REQUEST:
                # The digest of the bytes sent, not of the stored row: a row is sealed (a
                # random salt before the bytes, audit.sealing), so its own digest is another.
                bodies.add(digest(store.payload(event.payload_digests["request_body"])))
    return LogState(
        verified=report.ok,
        defects=tuple(str(d) for d in report.defects[:5]),
        head_seq=report.head_seq,
        statuses={r.request_id: r.status for r in rows},
        kinds={k: tuple(v) for k, v in kinds.items()},
        seqs={k: tuple(v) for k, v in seqs.items()},
        intent_bodies=frozenset(bodies),
        request_hashes=hashes,
    )


def run_cli(
    args: list[str], env: dict[str, str], stdin: bytes | None = None
) -> tuple[int, str, str]:
    """The real ``gateway`` executable in a subprocess: exit code, stdout, stderr."""
    done = subprocess.run(
        [str(GATEWAY_CLI), *args],
        input=stdin,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=ROOT,
        timeout=120,
    )
    return (
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )
