"""Scenario 6: secrets and prompt text do not leak.

Guarantee (DESIGN.md invariant 7): after a full run - answers, upstream failures that echo
the credential and the prompt back, a rejected request, exports, a checkpoint, a live replay
with an HTML report - neither the API key nor the checkpoint key appears in the database
files, the JSON logs, the exports, the report, the checkpoint file or any CLI output, and the
prompt text appears in no log line.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI, RecordedRequest, Reply
from tests.reliability.helpers import ForkServer, run_cli, settings_for

API_KEY = "sk-ant-api03-LEAKCANARY-" + uuid.uuid4().hex
CHECKPOINT_KEY = "c0ffee15deadbeef" * 4  # 32 bytes in hex, as GATEWAY_CHECKPOINT_KEY takes it
PROMPT_MARK = "PROMPTCANARY" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def logged_fork_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ForkServer, Path]]:
    """A fork server of its own, so its stderr file holds only this module's logs."""
    log = tmp_path_factory.mktemp("secrets") / "gateway.log"
    with ForkServer(log) as server:
        yield server, log


def _echoing(request: RecordedRequest) -> Reply:
    """A hostile upstream: errors that quote the credential and the prompt back."""
    auth = request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
    text = (request.json or {}).get("messages", [{}])[0].get("content", "")
    if "fail-final" in str(text):
        return Reply.error(400, message=f"bad request from {auth} about {text}")
    if "fail-retry" in str(text):
        return Reply.error(529, message=f"overloaded for {auth}: {text}")
    return Reply.ok(text="an answer")


def _leaks(blob: bytes) -> list[str]:
    secrets = {
        "api key": API_KEY.encode(),
        "api key tail": API_KEY[-32:].encode(),
        "checkpoint key": CHECKPOINT_KEY.encode(),
        "checkpoint key upper": CHECKPOINT_KEY.upper().encode(),
        "checkpoint key bytes": bytes.fromhex(CHECKPOINT_KEY),
    }
    return [name for name, needle in secrets.items() if needle in blob]


@pytest.mark.slow
def test_no_secret_in_database_logs_exports_reports_or_errors(
    logged_fork_server: tuple[ForkServer, Path],
    fake_api: FakeMessagesAPI,
    policy_dir: Path,
    tmp_path: Path,
) -> None:
    """Scan every artefact of a full run for both keys, and every log line for the prompt."""
    server, log_path = logged_fork_server
    db = tmp_path / "audit.db"
    url = f"sqlite:///{db}"
    fake_api.set_default(_echoing)
    settings = settings_for(
        url, fake_api.base_url, policy_dir, anthropic_api_key=API_KEY, max_attempts=2
    )
    prompts = [f"{PROMPT_MARK} {kind} {n}" for n in range(3) for kind in ("ok", "fail-final")]
    prompts += [f"{PROMPT_MARK} fail-retry"]
    records = server.run(
        {"name": "s", "settings": settings, "task": "compliance_review", "prompts": prompts,
         "log_level": "DEBUG"}
    )  # fmt: skip
    records += server.run(
        {"name": "r", "settings": settings, "task": "no_such_task", "prompts": [PROMPT_MARK],
         "log_level": "DEBUG"}
    )  # fmt: skip
    errors = sorted({str(r["error"]) for r in records if r["event"] == "error"})
    assert errors == ["UnknownTask", "UpstreamRejected", "UpstreamUnavailable"], records

    env = {
        "GATEWAY_DATABASE_URL": url,
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DURABILITY": "os",
        "GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY,
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake_api.base_url,
    }
    files = {
        "jsonl": tmp_path / "export.jsonl",
        "csv": tmp_path / "export.csv",
        "checkpoint": tmp_path / "head.json",
        "report": tmp_path / "replay.html",
    }
    outputs: list[tuple[list[str], int, str, str]] = []
    for args in (
        ["ask", "compliance_review", f"{PROMPT_MARK} cli ok"],
        ["ask", "compliance_review", f"{PROMPT_MARK} cli fail-final"],
        ["audit", "export", "--format", "jsonl", "-o", str(files["jsonl"])],
        ["audit", "export", "--format", "csv", "-o", str(files["csv"])],
        ["audit", "checkpoint", "-o", str(files["checkpoint"])],
        ["audit", "verify", "--checkpoint", str(files["checkpoint"])],
        ["replay", "--task", "compliance_review", "--live", "--report", str(files["report"])],
    ):
        code, out, err = run_cli(args, env)
        outputs.append((args, code, out, err))
    codes = [code for _args, code, _out, _err in outputs]
    assert codes[0] == 0 and codes[1] == 3 and codes[2:6] == [0, 0, 0, 0], outputs
    assert codes[6] != 70, outputs[6]

    scanned = 0
    artefacts: dict[str, bytes] = {p.name: p.read_bytes() for p in files.values() if p.exists()}
    assert len(artefacts) == len(files)
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{db}{suffix}")
        if path.exists():
            artefacts[path.name] = path.read_bytes()
    logs = log_path.read_bytes()
    artefacts["gateway.log"] = logs
    for args, _code, out, err in outputs:
        artefacts[" ".join(args[:2])] = (out + err).encode()
    for name, blob in artefacts.items():
        assert _leaks(blob) == [], name
        scanned += len(blob)
    # The scan can see: the prompt is stored in the database, the key went on the wire.
    stored = b"".join(v for k, v in artefacts.items() if k.startswith("audit.db"))
    assert PROMPT_MARK.encode() in stored
    assert "api key" in _leaks(fake_api.requests[0].headers["authorization"].encode())
    log_lines = logs.splitlines() + [
        line.encode() for _a, _c, _o, err in outputs for line in err.splitlines()
    ]
    assert log_lines and not [line for line in log_lines if PROMPT_MARK.encode() in line]
    assert b"request_completed" in logs and b"request_failed" in logs
    print(f"secrets: artefacts={len(artefacts)} bytes_scanned={scanned} log_lines={len(log_lines)}")
