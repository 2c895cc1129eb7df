"""Untrusted input is parsed with bounds: a typed error or a finding, never a RecursionError,
a hang or a record the database refuses."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway import Gateway, InputError, OutputValidationError, Settings, UnknownTask
from gateway._inputs import check_bounded, check_caller, check_overrides, safe_label
from gateway.catalog import Catalog
from gateway.policy import PolicySet, review_policies
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.gateway.conftest import events, kinds

DEEP = 100_000


def nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


# --- model answers ---------------------------------------------------------------------------


def test_a_json_answer_nested_100000_deep_is_recorded_as_a_failed_check(
    gw: Gateway, fake_api: FakeMessagesAPI, db_path: Path
) -> None:
    fake_api.script(Reply.ok(json_text="[" * DEEP + "]" * DEEP))
    with pytest.raises(OutputValidationError) as caught:
        gw.complete("json_extraction", "Confirm: ACME", caller="desk")
    response = events(db_path)[-1]
    assert str(response.kind) == "response"
    assert response.seq == caught.value.seq
    assert response.data["ok"] is False
    assert response.data["output_check"]["ok"] is False
    assert "levels deep" in response.data["output_check"]["problem"]
    assert kinds(db_path, caught.value.request_id) == ["request", "response"]


_PATTERN_CHECK = """
import json, time
from gateway._output_check import check_json_output
schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^(a+)+$"}}}
started = time.monotonic()
check = check_json_output(json.dumps({"id": "a" * 29 + "!"}), schema)
print(json.dumps({"ok": check.ok, "problem": check.problem, "s": time.monotonic() - started}))
"""


@pytest.mark.slow  # a process
def test_a_catastrophic_schema_pattern_checks_a_30_character_answer_in_bounded_time() -> None:
    # In a child process: a backtracking engine would hold the GIL for minutes.
    done = subprocess.run(
        [sys.executable, "-c", _PATTERN_CHECK], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["s"] < 2.0
    assert result["ok"] is False
    assert result["problem"] == "the output breaks the schema at $.id (pattern)"


# --- policy files ----------------------------------------------------------------------------


def _json_policy(policy_dir: Path, task: str, schema_file: str) -> None:
    text = (policy_dir / "json_extraction.toml").read_text(encoding="utf-8")
    text = text.replace("schemas/trade_confirmation.json", schema_file)
    (policy_dir / f"{task}.toml").write_text(text, encoding="utf-8")


def test_a_50000_deep_toml_array_is_that_policys_finding_and_other_tasks_still_load(
    policy_dir: Path, tmp_path: Path
) -> None:
    base = (policy_dir / "quant_strategy.toml").read_text(encoding="utf-8")
    deep = "[" * 50_000 + "]" * 50_000
    (policy_dir / "deep.toml").write_text(base + f"\n[x]\ny = {deep}\n", encoding="utf-8")
    report = review_policies(policy_dir, Catalog.load())
    [finding] = [f for f in report.findings if f.file == "deep.toml"]
    assert (finding.rule, finding.key) == ("nesting-too-deep", "file")
    assert {p.task for p in report.policies} >= {"offline_demo", "quant_strategy"}
    settings = Settings(
        policy_dir=policy_dir, database_url=f"sqlite:///{tmp_path / 'a.db'}", durability="os"
    )
    with Gateway(settings, offline=True) as gw:
        assert gw.complete("offline_demo", "The reviewer reads the").text


def test_a_schema_file_nested_100000_deep_is_that_policys_finding(policy_dir: Path) -> None:
    (policy_dir / "schemas" / "deep.json").write_text(
        '{"type": "object", "x": ' + "[" * DEEP + "]" * DEEP + "}", encoding="utf-8"
    )
    _json_policy(policy_dir, "deep_schema", "schemas/deep.json")
    policies = PolicySet.load(policy_dir, Catalog.load())
    entry = policies.entry("deep_schema")
    assert entry is not None and entry.policy is None
    assert [(f.rule, f.key) for f in entry.findings] == [("nesting-too-deep", "output.schema_file")]
    assert policies.get("json_extraction").output.json_schema is not None


def test_a_schema_whose_refs_loop_is_refused_at_review(policy_dir: Path) -> None:
    loop = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    (policy_dir / "schemas" / "loop.json").write_text(json.dumps(loop), encoding="utf-8")
    _json_policy(policy_dir, "loop_schema", "schemas/loop.json")
    entry = PolicySet.load(policy_dir, Catalog.load()).entry("loop_schema")
    assert entry is not None
    assert [f.rule for f in entry.findings] == ["schema-file-invalid"]
    assert "loop" in entry.findings[0].message


def test_a_dotted_key_of_20000_parts_is_refused_without_parsing_it(policy_dir: Path) -> None:
    base = (policy_dir / "quant_strategy.toml").read_text(encoding="utf-8")
    (policy_dir / "dotted.toml").write_text(base + "\nx" + ".a" * 20_000 + " = 1\n", "utf-8")
    started = time.monotonic()
    entry = PolicySet.load(policy_dir, Catalog.load()).entry("dotted")
    assert time.monotonic() - started < 2.0  # tomllib takes quadratic time on such a key
    assert entry is not None
    assert [f.rule for f in entry.findings] == ["nesting-too-deep"]


def test_an_oversized_policy_file_is_not_read(policy_dir: Path) -> None:
    base = (policy_dir / "quant_strategy.toml").read_text(encoding="utf-8")
    (policy_dir / "huge.toml").write_text(base + ("# padding\n" * 40_000), encoding="utf-8")
    entry = PolicySet.load(policy_dir, Catalog.load()).entry("huge")
    assert entry is not None and entry.policy is None
    assert [f.rule for f in entry.findings] == ["file-unreadable"]
    assert "larger than" in entry.findings[0].message


# --- caller-supplied messages and overrides --------------------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": nested(DEEP), "content": "x"}],
        [{"role": "user", "content": [{"type": "text", "text": nested(DEEP)}]}],
        nested(DEEP),
    ],
    ids=["deep-role", "deep-text", "deep-list"],
)
def test_deeply_nested_messages_raise_input_error_and_are_recorded(
    gw: Gateway, db_path: Path, messages: object
) -> None:
    with pytest.raises(InputError, match="nested more than"):
        gw.complete("quant_strategy", messages=messages, caller="desk")
    assert kinds(db_path) == ["rejected"]


def test_deeply_nested_overrides_are_refused_by_the_input_check() -> None:
    with pytest.raises(InputError, match="nested more than"):
        check_overrides({"temperature": nested(DEEP)})
    with pytest.raises(InputError, match="mapping"):
        check_overrides([("temperature", 0.2)])
    assert check_overrides({"temperature": 0.2}) == {"temperature": 0.2}
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(InputError):
        check_bounded({"x": cycle}, "overrides")


def test_deeply_nested_overrides_raise_input_error_through_the_gateway(
    gw: Gateway, db_path: Path
) -> None:
    with pytest.raises(InputError):
        gw.complete(
            "quant_strategy", "ideas", caller="desk", overrides={"temperature": nested(DEEP)}
        )
    assert kinds(db_path) == ["rejected"]


def test_safe_label_never_recurses_on_a_deep_value() -> None:
    assert safe_label(nested(DEEP)) == "<list>"


# --- caller and task names -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caller", "problem"),
    [
        ("pay\x00ments", "U+0000 at position 4"),
        ("pay\x1b[2Jments", "U+001B at position 4"),
        ("payments\u200b", "U+200B at position 9"),
        ("pay\u202ements", "U+202E at position 4"),
        (" payments", "whitespace"),
        ("payments\n", "whitespace"),
        ("pay\rments", "U+000D at position 4"),
    ],
)
def test_a_caller_with_control_invisible_or_surrounding_whitespace_is_refused_and_recorded(
    gw: Gateway, db_path: Path, caller: str, problem: str
) -> None:
    with pytest.raises(InputError) as caught:
        gw.complete("quant_strategy", "ideas", caller=caller)
    message = str(caught.value)
    assert problem in message and "\n" not in message and caller not in message
    assert "such as 'payments-svc'" in message
    [rejected] = events(db_path)
    assert str(rejected.kind) == "rejected"
    assert rejected.caller is not None and rejected.caller.isprintable()


def test_a_task_name_with_nul_is_refused_and_the_rejection_is_recorded(
    gw: Gateway, db_path: Path
) -> None:
    with pytest.raises(UnknownTask):
        gw.complete("quant\x00strategy\x1b[2J", "ideas", caller="desk")
    [rejected] = events(db_path)
    assert rejected.task == "quant\\x00strategy\\x1b[2J"


def test_safe_label_escapes_what_a_database_or_terminal_would_misread() -> None:
    assert safe_label("a\x00b\x1b\ud800\u200b") == "a\\x00b\\x1b\\ud800\\u200b"
    assert safe_label("payments-svc") == "payments-svc"
    assert len(safe_label("\x00" * 1000)) <= 200
    assert check_caller("payments-svc") == "payments-svc"
