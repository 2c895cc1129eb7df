"""docs/deployment.md, walked: every `$ ` line of its console blocks runs, in order, in one
bash shell, against a throwaway PostgreSQL database and the loopback fake of the Messages
API, with two `gateway serve` processes over TLS. A command the doc shows that no longer
works (a renamed flag, a changed output the next line relies on) fails here, so the doc
cannot drift from the code.

The doc's variables (ADMIN_URL, APP_URL, REVIEWER_URL, ADMIN_DSN, ANTHROPIC_API_KEY,
TLS_DIR) are set here; its ports 8081 and 8082 are mapped to free ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit import AuditStore, EventKind
from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import free_port
from tests.server.test_tls import make_ca_and_server_cert
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.slow  # PostgreSQL and two `gateway serve` processes

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "deployment.md"
_BLOCK = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)


def doc_commands(text: str) -> list[str]:
    """The doc's commands: each `$ ` line of its console blocks, in order."""
    return [
        line[2:]
        for block in _BLOCK.findall(text)
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def test_the_doc_has_the_walkthrough_the_test_runs() -> None:
    commands = doc_commands(DOC.read_text(encoding="utf-8"))
    assert commands[0] == "gateway init deploy"
    assert sum(c.startswith("gateway serve") for c in commands) == 2
    assert any("audit verify" in c for c in commands)


def test_walk_docs_deployment(
    tmp_path: Path, postgres_server: PostgresServer, fake_api: FakeMessagesAPI
) -> None:
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    tls = tmp_path / "tls"
    tls.mkdir()
    make_ca_and_server_cert(tls)  # ca.pem, server.pem, server.key
    database = postgres_server.create_database()
    ports = {"8081": str(free_port()), "8082": str(free_port())}
    commands = doc_commands(DOC.read_text(encoding="utf-8"))
    script = [
        "set -euo pipefail",
        # The background servers stop (SIGTERM) when the walk ends, however it ends.
        "trap 'kill $(jobs -p) 2>/dev/null || true; wait || true' EXIT",
    ]
    # Roles are the cluster's, not the database's: the doc's names get this run's suffix, so
    # the walk does not meet roles another test (or an earlier walk) created.
    suffix = database.replace("-", "_")[-12:]
    roles = {"gateway_app": f"gateway_app_{suffix}", "auditor": f"auditor_{suffix}"}
    for command in commands:
        for doc_port, port in ports.items():
            command = command.replace(doc_port, port)
        for doc_role, role in roles.items():
            command = re.sub(rf"\b{doc_role}\b", role, command)
        # Each command's output ends its own line (curl's answers end without a newline).
        script += [f"echo '+ {command.replace(chr(39), '')[:100]}' >&2", command, "echo"]
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GATEWAY_", "ANTHROPIC_"))
    }
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
            "ADMIN_URL": postgres_server.url(database),
            "APP_URL": postgres_server.url(database, user=roles["gateway_app"]),
            "REVIEWER_URL": postgres_server.url(database, user=roles["auditor"]),
            "ADMIN_DSN": postgres_server.dsn(database),
            "ANTHROPIC_API_KEY": "sk-ant-test-deployment-doc",
            "ANTHROPIC_BASE_URL": fake_api.base_url,
            "TLS_DIR": str(tls),
            "GATEWAY_DURABILITY": "os",
        }
    )
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{done.stderr[-4000:]}\n{done.stdout[-2000:]}"
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"')]
    messages = [a for a in answers if a.get("type") == "message"]
    assert len(messages) == 2, done.stdout[-2000:]
    assert "intact" in done.stdout, done.stdout[-2000:]

    # Both instances wrote to the one log, as payments-svc, and the rotation is on it.
    with AuditStore.open(postgres_server.url(database), create=False) as store:
        requests = list(store.iter_events(kind=EventKind.REQUEST))
        revoked = list(store.iter_events(kind=EventKind.CALLER_KEY_REVOKED))
    assert {e.caller for e in requests} == {"payments-svc"} and len(requests) == 2
    assert revoked and revoked[0].data.get("grace_until")
    deploy = tmp_path / "deploy"
    assert (deploy / "payments-svc.new.secret").read_text().startswith("gwk_")
    assert "gateway serving on https://" in (deploy / "serve-a.log").read_text()
    assert "gateway serving on https://" in (deploy / "serve-b.log").read_text()
