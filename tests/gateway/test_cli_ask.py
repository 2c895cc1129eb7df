"""`gateway ask`: one request from the command line, one clear line on any error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import API_KEY, kinds


@pytest.fixture
def env(policy_dir: Path, db_path: Path, fake_api: FakeMessagesAPI) -> dict[str, str]:
    return {
        "GATEWAY_POLICY_DIR": str(policy_dir),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DATABASE_URL": f"sqlite:///{db_path}",
        "GATEWAY_DURABILITY": "os",
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_BASE_URL": fake_api.base_url,
    }


def ask(env: dict[str, str], *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["ask", *args], input=stdin, env=env)
    return result.exit_code, result.stdout, result.stderr


def test_ask_prints_the_answer_and_where_it_is_recorded(
    env: dict[str, str], fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(Reply.ok(text="No finding."))
    code, out, err = ask(env, "compliance_review", "Transaction: 1", "--caller", "ops")
    assert code == 0, err
    assert out == "No finding.\n"
    assert "seq 2" in err


def test_ask_reads_stdin_and_prints_json(env: dict[str, str], db_path: Path) -> None:
    code, out, err = ask(env, "compliance_review", "--format", "json", stdin="Transaction: 2")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= {
        "text",
        "json",
        "request_id",
        "request_hash",
        "seq",
        "cached",
        "model",
        "usage",
        "policy_fingerprint",
    }
    assert kinds(db_path, data["request_id"]) == ["request", "response"]


def test_ask_applies_an_allowed_override(env: dict[str, str], fake_api: FakeMessagesAPI) -> None:
    code, _, err = ask(env, "compliance_review", "T", "--override", "max_tokens=512")
    assert code == 0, err
    assert fake_api.requests[0].json == {**(fake_api.requests[0].json or {}), "max_tokens": 512}


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["no_such_task", "x"], 2, "Known tasks"),
        (["compliance_review", "x", "--override", "temperature=0.9"], 2, "temperature"),
        (["compliance_review", "x", "--override", "max_tokens"], 2, "KEY=VALUE"),
        (["compliance_review", "   "], 2, "prompt is empty"),
    ],
)
def test_ask_errors_are_one_line_with_an_exit_code(
    env: dict[str, str], fake_api: FakeMessagesAPI, args: list[str], code: int, needle: str
) -> None:
    exit_code, _, err = ask(env, *args)
    assert exit_code == code
    assert needle in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert fake_api.requests == []


def test_ask_without_a_key_says_how_to_set_one_or_run_offline(
    env: dict[str, str], fake_api: FakeMessagesAPI
) -> None:
    env = {**env, "ANTHROPIC_API_KEY": ""}
    code, _, err = ask(env, "compliance_review", "x")
    assert code == 2
    assert "ANTHROPIC_API_KEY" in err and "--offline" in err
    assert fake_api.requests == []


def test_ask_offline_runs_on_the_local_model_without_a_key(
    env: dict[str, str], fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    env = {**env, "ANTHROPIC_API_KEY": ""}
    code, out, err = ask(
        env, "--offline", "compliance_review", "Transaction: 3", "--format", "json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["model"] == "local:ngram"
    assert fake_api.requests == []


def test_ask_upstream_failure_exits_3(env: dict[str, str], fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.error(401, error_type="authentication_error"))
    code, _, err = ask(env, "quant_strategy", "x")
    assert code == 3
    assert API_KEY not in err
    assert "Traceback" not in err


def test_ask_exits_1_on_an_answer_alert(env: dict[str, str], fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Reply.ok(text="Approved.", model="claude-opus-4-6"))
    code, out, err = ask(env, "compliance_review", "Transaction: 3")
    assert code == 1
    assert out == "Approved.\n"  # the answer is printed all the same
    (line,) = [x for x in err.splitlines() if x.startswith("answer alert")]
    assert "(model)" in line and "gateway audit show req_" in line
    assert "Warning" not in err  # said once, in words, not as a Python warning
    fake_api.script(Reply.ok(text="Approved.", model="claude-opus-4-6"))
    code, out, _ = ask(env, "compliance_review", "Transaction: 4", "--format", "json")
    assert code == 1 and json.loads(out)["alerts"] == ["model"]
    code, _, err = ask(env, "compliance_review", "Transaction: 5")
    assert code == 0, err
