"""`gateway experiment` through the real CLI and its error boundary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import EventKind
from gateway.cli import main
from tests.experiment.conftest import SHIPPED, all_events
from tests.fakes.messages_api import FakeMessagesAPI

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def env(db_url: str) -> dict[str, str]:
    return {
        "GATEWAY_DATABASE_URL": db_url,
        "GATEWAY_POLICY_DIR": str(SHIPPED),
        "GATEWAY_DEFAULT_CALLER": "tests",
        "GATEWAY_DURABILITY": "os",
        "ANTHROPIC_API_KEY": "",
    }


def invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["experiment", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_table_has_one_row_per_prompt_and_config_with_seq_ranges(
    env: dict[str, str], db_url: str
) -> None:
    code, out, err = invoke(
        env, "--prompt", "The reviewer reads the", "-n", "3",
        "--config", "cold=0", "--config", "warm=0.9,top_p=0.95",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "task offline_demo on local:ngram, 3 samples per row"
    assert lines[1].split()[:6] == ["prompt", "config", "unique", "dist-1", "dist-2", "length"]
    rows = lines[2:]
    assert [r.split()[4] for r in rows] == ["cold", "warm"]
    assert rows[0].split()[5] == "0.33"  # greedy: three identical samples
    responses = [e.seq for e in all_events(db_url) if e.kind is EventKind.RESPONSE]
    assert f"{responses[0]}-{responses[2]}" in rows[0]
    assert f"{responses[3]}-{responses[5]}" in rows[1]
    assert "sampling" in err  # the progress bar's label, on stderr


def test_json_lists_rows_and_skipped_configs_with_reasons(env: dict[str, str]) -> None:
    code, out, err = invoke(env, "--prompt", "Payment held because", "-n", "2", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["task"] == "offline_demo" and report["n"] == 2
    assert {row["config"] for row in report["rows"]} >= {"greedy", "T1.0 top_p0.95"}
    for row in report["rows"]:
        assert row["samples"] == 2 and len(row["request_ids"]) == 2
        assert row["first_seq"] < row["last_seq"]
    for skipped in report["skipped"]:
        assert skipped["reason"] and f"skipped {skipped['config']!r}" in err


def test_prompts_file_adds_one_prompt_per_non_blank_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("The reviewer reads the\n\nPayment held because\n", encoding="utf-8")
    code, out, err = invoke(
        env, "--prompts-file", str(prompts), "-n", "1", "--config", "g=0", "--format", "json"
    )
    assert code == 0, err
    assert [r["prompt"] for r in json.loads(out)["rows"]] == [
        "The reviewer reads the",
        "Payment held because",
    ]


def test_plot_writes_a_png(env: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "diversity.png"
    code, _, err = invoke(
        env, "--prompt", "The reviewer reads the", "-n", "2",
        "--config", "g=0", "--config", "w=0.8", "--plot", str(target),
    )  # fmt: skip
    assert code == 0, err
    assert target.read_bytes().startswith(PNG_MAGIC)
    assert f"plot written to {target}" in err


def test_plot_without_matplotlib_is_one_clear_line(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes `import matplotlib` raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = invoke(
        env, "--prompt", "x", "-n", "1", "--config", "g=0", "--plot", str(tmp_path / "p.png")
    )
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("error: --plot needs matplotlib")
    assert "compliance-gateway[plot]" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("bad", "is not NAME=T"),
        ("w=hot", "is not usable"),
        ("w=0.5,top_p=2", "top_p: input should be less than or equal to 1"),
        ("w=0.5,typical_p=0.2", "is not top_p=, top_k= or min_p="),
        ("w=-1", "temperature: input should be greater than or equal to 0"),
        ("w=0.5,top_k=1.5", "is not usable"),
    ],
)
def test_a_bad_config_string_is_one_line_and_exit_2(
    env: dict[str, str], db_url: str, config: str, says: str
) -> None:
    code, out, err = invoke(env, "--prompt", "x", "--config", config)
    assert code == 2
    assert out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("error: --config") and says in line
    assert not Path(db_url.removeprefix("sqlite:///")).exists()  # refused before any request


def test_no_prompt_and_unknown_task_exit_2(env: dict[str, str]) -> None:
    code, _, err = invoke(env, "-n", "1")
    assert code == 2 and "no prompt was given" in err
    code, _, err = invoke(env, "no_such_task", "--prompt", "x")
    assert code == 2 and "unknown task 'no_such_task'" in err


def test_claude_task_without_sampling_runs_only_the_default(
    env: dict[str, str], fake_api: FakeMessagesAPI
) -> None:
    env = {**env, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": fake_api.base_url}
    code, out, err = invoke(env, "risk_report", "--prompt", "Rates desk", "-n", "2")
    assert code == 0, err
    rows = out.splitlines()[2:]
    assert [r.split()[2] for r in rows] == ["default"]
    assert err.count("samples with its own defaults only") == 5
    assert len(fake_api.requests) == 2
