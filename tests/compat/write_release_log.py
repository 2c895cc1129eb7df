"""Write a small audit log with the code of the tree this runs from, for the layout-compat test.

    .venv/bin/python -m tests.compat.write_release_log tests/compat/release_0_1_0

Run once with a released tree (the data committed beside it says which commit wrote it); the
test then opens that log with today's code. Everything runs offline through the CLI as
processes, as a deployment would: a recorded answer and its replay-cache hit, a stream, a
tool call, an audited experiment, a refused override, Claude calls through the SDK against the
loopback fake (an answer, its cache hit, a stream, a failure after retries), replay --verify
and a signed checkpoint.
The record and checkpoint keys are fixed test keys, written beside the log on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.fakes.messages_api import FakeMessagesAPI, Reply

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = str(Path(sys.executable).with_name("gateway"))
RECORD_KEY = "11" * 32  # test-only Ed25519 seeds: this log is a fixture, not evidence
CHECKPOINT_KEY = "22" * 32
QUESTION = "Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."


def public_hex(seed_hex: str) -> str:
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed_hex))
    return key.public_key().public_bytes_raw().hex()


def main(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    # The policies as they were: the test replays against them, whatever policies/ holds later.
    shutil.copytree(ROOT / "policies", out / "policies")
    env = {
        **os.environ,
        "GATEWAY_DATABASE_URL": f"sqlite:///{out / 'audit.db'}",
        "GATEWAY_POLICY_DIR": str(out / "policies"),
        "GATEWAY_DURABILITY": "os",
        "GATEWAY_RECORD_KEY": RECORD_KEY,
        "GATEWAY_CHECKPOINT_KEY": CHECKPOINT_KEY,
    }
    env.pop("ANTHROPIC_API_KEY", None)

    def gateway(*args: str, ok: bool = True) -> None:
        done = subprocess.run([GATEWAY, *args], env=env, capture_output=True, text=True)
        if ok and done.returncode != 0:
            raise SystemExit(f"gateway {' '.join(args)} failed: {done.stderr.strip()}")

    short = ["--override", "max_tokens=256"]
    ask = ["ask", "--offline", "compliance_review", QUESTION, "--caller", "desk-a", *short]
    gateway(*ask)
    gateway(*ask)  # served from the replay cache
    gateway("ask", "--stream", "offline_demo", "The reviewer reads the", "--caller", "desk-b")
    gateway("ask", "--offline", "sanctions_screening", "ACME Shipping Ltd, Panama")
    gateway("experiment", "offline_demo", "--prompt", "The reviewer reads the", "-n", "2")
    with FakeMessagesAPI() as fake:  # the Claude path: the SDK against a loopback Messages API
        env.update(ANTHROPIC_API_KEY="sk-ant-compat", ANTHROPIC_BASE_URL=fake.base_url)
        fake.script(
            Reply.ok(text="<verdict>PASS</verdict> No rule breached."),
            Reply.stream(text="Rates rose; the desk's exposure is within its limits."),
            Reply.error(500),
            Reply.error(500),
            Reply.error(500),
            Reply.error(500),
        )
        claude = ["ask", "compliance_review", QUESTION, "--caller", "desk-c", *short]
        gateway(*claude)
        gateway(*claude)  # served from the replay cache
        risk = ["ask", "risk_report", "--caller", "desk-d"]
        gateway(*risk, "--stream", "Summarise the desk's rate risk.")
        gateway(*risk, "This one fails upstream.", ok=False)
        env.pop("ANTHROPIC_API_KEY")
        env.pop("ANTHROPIC_BASE_URL")
    refused = ["--override", "max_tokens=999999"]
    gateway("ask", "--offline", "compliance_review", QUESTION, *refused, ok=False)
    gateway("replay", "--verify")
    gateway("audit", "checkpoint", "-o", str(out / "checkpoint.json"))
    (out / "record.pub").write_text(public_hex(RECORD_KEY) + "\n")
    (out / "checkpoint.pub").write_text(public_hex(CHECKPOINT_KEY) + "\n")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    (out / "WRITTEN_BY").write_text(f"{commit}\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
