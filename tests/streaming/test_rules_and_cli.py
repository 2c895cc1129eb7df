"""The max-tokens-streaming rule (its threshold is the catalog's, checked against the SDK's
own rule), `policy show`'s stream line, and `gateway ask --stream`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import anthropic
import pytest
from click.testing import CliRunner

from gateway.catalog import Catalog
from gateway.cli import main
from gateway.policy import Finding, PolicySet, Severity
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.streaming.conftest import kinds, verified

POLICY = """\
schema = 1
description = "Long answers."
owner = "tests"

[model]
id = "{model}"

[generation]
max_tokens = {max_tokens}

[output]
stream = "{stream}"
"""


def _findings(
    tmp_path: Path, stream: str, max_tokens: int, model: str = "claude-opus-5-5"
) -> list[Finding]:
    folder = tmp_path / stream
    folder.mkdir()
    (folder / "long.toml").write_text(
        POLICY.format(stream=stream, max_tokens=max_tokens, model=model)
    )
    (entry,) = PolicySet.load(folder, Catalog.load(), today=date(2026, 12, 1)).entries()
    return [f for f in entry.findings if f.rule == "max-tokens-streaming"]


def test_max_tokens_above_the_non_streaming_limit_needs_a_streaming_task(tmp_path: Path) -> None:
    (never,) = _findings(tmp_path, "never", 64000)
    assert never.severity is Severity.ERROR and "never streams" in never.message
    (may,) = _findings(tmp_path, "may", 64000)
    assert may.severity is Severity.WARNING
    assert _findings(tmp_path, "must", 64000) == []
    limit = Catalog.load().get("claude-opus-5-5").non_streaming_max_tokens  # type: ignore[union-attr]
    assert limit is not None
    (tmp_path / "edge").mkdir()
    assert _findings(tmp_path / "edge", "never", limit) == []


def _sdk_limit(client: anthropic.Anthropic, model: str) -> int:
    """The largest max_tokens the installed SDK accepts without streaming (its own rule)."""
    from anthropic._constants import MODEL_NONSTREAMING_TOKENS

    low, high = 1, 10_000_000
    while low < high:
        mid = (low + high + 1) // 2
        try:
            client._calculate_nonstreaming_timeout(mid, MODEL_NONSTREAMING_TOKENS.get(model))
            low = mid
        except ValueError:
            high = mid - 1
    return low


def test_the_catalogs_non_streaming_limit_is_the_sdks() -> None:
    client = anthropic.Anthropic(api_key="sk-ant-unused", base_url="http://127.0.0.1:9")
    for model in Catalog.load():
        if model.provider == "anthropic" and model.lifecycle != "retired":
            assert model.non_streaming_max_tokens == _sdk_limit(client, model.id), model.id


def test_policy_show_prints_the_stream_setting(policy_dir: Path) -> None:
    out = CliRunner().invoke(main, ["policy", "show", "chat_must", "--policy-dir", str(policy_dir)])
    assert out.exit_code == 0, out.output
    assert any(line.split()[:2] == ["stream", "must"] for line in out.output.splitlines())
    shown = CliRunner().invoke(
        main, ["policy", "show", "chat", "--policy-dir", str(policy_dir), "--format", "json"]
    )
    assert json.loads(shown.output)["stream"] == "may"


def test_ask_stream_prints_text_as_it_arrives_and_the_id_on_stderr(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_POLICY_DIR", str(policy_dir))
    monkeypatch.setenv("GATEWAY_DATABASE_URL", f"sqlite:///{db_path}")
    monkeypatch.setenv("GATEWAY_DURABILITY", "os")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-cli")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.base_url)
    fake_api.script(Reply.stream("one two three four", deltas=4))
    out = CliRunner().invoke(main, ["ask", "--stream", "chat", "hello", "--caller", "cli"])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("one two three four")
    request_id = out.stderr.split()[0].lstrip("[")
    assert "seq 2" in out.stderr
    assert kinds(db_path, request_id) == ["request", "response"]


_CHILD = textwrap.dedent(
    """
    import sys
    from gateway import Gateway, Settings
    settings = Settings(policy_dir=sys.argv[1], database_url=sys.argv[2], durability="os",
                        anthropic_api_key="sk-ant-test-kill", anthropic_base_url=sys.argv[3],
                        default_caller="tests")
    with Gateway(settings) as gw, gw.stream("chat", "hello") as s:
        for event in s:
            if event["type"] == "content_block_delta":
                print(s.request_id, flush=True)
    """
)


def _cli_env(policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI) -> dict[str, str]:
    return {
        **os.environ,
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DATABASE_URL": f"sqlite:///{db_path}",
        "GATEWAY_DURABILITY": "os",
        "ANTHROPIC_API_KEY": "sk-ant-test-cli",
        "ANTHROPIC_BASE_URL": fake_api.base_url,
    }


@pytest.mark.slow  # the CLI as a process
def test_a_process_killed_mid_stream_leaves_the_request_incomplete_and_the_log_verifies(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.stream("one two three four five six", deltas=6, delay=0.5))
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(policy_dir), f"sqlite:///{db_path}", fake_api.base_url],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    request_id = child.stdout.readline().strip()
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert kinds(db_path, request_id) == ["request"]  # shown as incomplete, nothing invented
    verified(db_path)


@pytest.mark.slow  # the CLI as a process
def test_ctrl_c_during_ask_stream_records_cancelled_and_exits_130(
    policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.stream("one two three four five six", deltas=6, delay=0.5))
    child = subprocess.Popen(
        [str(Path(sys.executable).parent / "gateway"), "ask", "--stream", "chat", "hello"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**_cli_env(policy_dir, db_path, fake_api), "GATEWAY_DEFAULT_CALLER": "cli"},
        text=True,
        # As from a terminal: Ctrl-C at its default. An ignored SIGINT is inherited across
        # exec, and Python then keeps ignoring it (as it should under nohup).
        preexec_fn=_default_sigint,
    )
    assert child.stdout is not None
    assert child.stdout.read(4) == "one "  # the first delta arrived
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=10) == 130
    (request_id,) = {e for e in _request_ids(db_path)}
    assert kinds(db_path, request_id) == ["request", "cancelled"]
    verified(db_path)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _request_ids(db_path: Path) -> list[str]:
    from tests.streaming.conftest import events

    return [e.request_id for e in events(db_path) if str(e.kind) == "request"]
