"""``gateway replay --policies DIR``: replay the log under a candidate policy folder (a
proposed edit, before approval); the report names the policy version each side used."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from audit import AuditStore
from gateway import Gateway
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.policy import PolicySet
from gateway.providers.anthropic import AnthropicProvider
from gateway.providers.registry import Providers
from gateway.replay import Mode, Outcome, Replayer, ReplayReport, Selection
from gateway.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, Reply
from tests.replay.conftest import API_KEY
from tests.replay.helpers import head, replay_events

PATTERN = r"<verdict>\s*(PASS|ESCALATE|BLOCK)\s*</verdict>"
RECORDED = ["PASS", "BLOCK", "PASS"]


def _answer(verdict: str) -> Reply:
    return Reply.ok(text=f"<verdict>{verdict}</verdict>\n<reasons>No rule is breached.")


def _with_verdict(folder: Path) -> None:
    toml = folder / "compliance_review.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text.replace("[output]\n", f"[output]\nverdict = '{PATTERN}'\n"), "utf-8")


def _record(policy_dir: Path, url: str, fake_api: FakeMessagesAPI) -> list[str]:
    _with_verdict(policy_dir)
    fake_api.script(*(_answer(v) for v in RECORDED), Reply.ok(text="Idea: FX momentum."))
    with Gateway(policy_dir=policy_dir, database_url=url, anthropic_api_key=API_KEY,
                 base_url=fake_api.base_url, durability="os") as gw:  # fmt: skip
        ids = [
            gw.complete("compliance_review", f"Pay {n} EUR to ACME.", caller="pay").request_id
            for n in range(len(RECORDED))
        ]
        ids.append(gw.complete("quant_strategy", "FX ideas", caller="desk").request_id)
    return ids


def _candidate(policy_dir: Path, tmp_path: Path) -> Path:
    """The proposed edit: compliance_review's max_tokens and prompt change."""
    folder = tmp_path / "proposed"
    shutil.copytree(policy_dir, folder)
    toml = folder / "compliance_review.toml"
    toml.write_text(toml.read_text("utf-8").replace("max_tokens = 2048", "max_tokens = 1024"))
    prompt = folder / "prompts" / "compliance_review.md"
    prompt.write_text(prompt.read_text("utf-8") + "\nEscalate any payment to a new payee.\n")
    return folder


def _replay(
    url: str, base_url: str, ids: list[str], folder: Path, *, live: bool, model: str | None = None
) -> ReplayReport:
    providers = Providers(Settings(), overrides={"anthropic": lambda _s: AnthropicProvider(
        api_key=API_KEY, base_url=base_url, max_attempts=1)})  # fmt: skip
    with AuditStore.open(url, "os") as store:
        replayer = Replayer(store, Catalog.load(), providers, operator="m.risk")
        selection = Selection(request_ids=tuple(ids))
        prepared = replayer.prepare(selection, live=live, model=model, policies=folder)
        report = replayer.run(prepared)
    providers.close()
    return report


def _fingerprint(folder: Path, task: str) -> str:
    return PolicySet.load(folder, Catalog.load()).get(task).fingerprint


def test_a_candidate_folder_replans_each_request_and_names_both_versions(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    ids = _record(policy_dir, sqlite_url, fake_api)
    folder = _candidate(policy_dir, tmp_path)
    old, new = (
        _fingerprint(policy_dir, "compliance_review"),
        _fingerprint(folder, "compliance_review"),
    )
    report = _replay(sqlite_url, fake_api.base_url, ids, folder, live=False)
    assert report.summary.mode is Mode.POLICIES
    assert report.candidate == str(folder)
    assert report.candidate_versions["compliance_review"] == new
    assert "candidate policies" in report.title
    rows = {r.request_id: r for r in report.requests}
    for request_id in ids[:3]:
        row = rows[request_id]
        assert row.outcome is Outcome.DIFFERING
        assert (row.recorded_policy, row.replayed_policy) == (old, new)
        assert {c.path for c in row.request_changes} == {"$.max_tokens", "$.system"}
    # The unchanged task replays under its candidate version, the same fingerprint.
    quant = rows[ids[3]]
    assert quant.outcome is Outcome.IDENTICAL
    assert quant.recorded_policy == quant.replayed_policy
    (task,) = [t for t in report.by_task() if t.task == "compliance_review"]
    assert [(c.text, c.count) for c in task.policy_versions] == [(f"{old[:19]} -> {new[:19]}", 3)]
    # The REPLAY events name the candidate version, and the log now holds its content.
    events = {e.data["original_request_id"]: e for e in replay_events(sqlite_url)}
    assert events[ids[0]].policy_fingerprint == new
    assert events[ids[0]].data["mode"] == "policies"
    with AuditStore.open(sqlite_url, "os") as store:
        content = store.policy_content(new)
    assert content is not None and content["generation"]["max_tokens"] == 1024


def test_a_live_candidate_run_shows_the_flips_the_edit_would_cause(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    ids = _record(policy_dir, sqlite_url, fake_api)[:3]
    folder = _candidate(policy_dir, tmp_path)
    fake_api.script(_answer("ESCALATE"), _answer("BLOCK"), _answer("PASS"))
    report = _replay(sqlite_url, fake_api.base_url, ids, folder, live=True)
    assert report.summary.mode is Mode.POLICIES_LIVE
    (task,) = report.by_task()
    assert task.flips == 1
    flipped = next(c for c in task.verdicts if c.flipped)
    assert (flipped.recorded, flipped.replayed, flipped.request_ids) == (
        "PASS",
        "ESCALATE",
        (ids[0],),
    )
    # What was sent is the candidate's request: its max_tokens reached the upstream.
    assert [(r.json or {}).get("max_tokens") for r in fake_api.requests[-3:]] == [1024, 1024, 1024]
    intents = replay_events(sqlite_url, phase="intent")
    assert {e.policy_fingerprint for e in intents} == {_fingerprint(folder, "compliance_review")}


def test_a_task_the_candidate_lacks_is_refused_and_the_others_replay(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    ids = _record(policy_dir, sqlite_url, fake_api)
    folder = _candidate(policy_dir, tmp_path)
    (folder / "quant_strategy.toml").unlink()
    env = {"GATEWAY_DATABASE_URL": sqlite_url, "GATEWAY_POLICY_DIR": str(policy_dir),
           "GATEWAY_DURABILITY": "os", "ANTHROPIC_API_KEY": API_KEY,
           "ANTHROPIC_BASE_URL": fake_api.base_url}  # fmt: skip
    page = tmp_path / "edit.html"
    args = ["replay", *ids, "--policies", str(folder), "--fail-on-refused", "--operator", "m.risk",
            "--report", str(page)]  # fmt: skip
    out = CliRunner().invoke(main, args, env=env)
    assert out.exit_code == 1, out.output
    new = _fingerprint(folder, "compliance_review")
    assert "candidate policies: " in out.stdout and f"compliance_review {new[:19]}" in out.stdout
    assert "policy version (3 requests): " in out.stdout
    assert "has no policy for task 'quant_strategy'" in out.stdout
    assert "1 request(s) refused on the policies in" in out.stderr
    html = page.read_text(encoding="utf-8")
    assert "id='candidate'" in html and f"compliance_review {new[:19]}" in html
    assert "Policy versions (recorded -&gt; replayed)" in html


def test_a_missing_candidate_folder_is_bad_input_and_records_nothing(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    ids = _record(policy_dir, sqlite_url, fake_api)
    before = head(sqlite_url)
    env = {"GATEWAY_DATABASE_URL": sqlite_url, "GATEWAY_POLICY_DIR": str(policy_dir),
           "GATEWAY_DURABILITY": "os"}  # fmt: skip
    for folder in (tmp_path / "nowhere", tmp_path):  # missing; a folder without policy files
        out = CliRunner().invoke(main, ["replay", ids[0], "--policies", str(folder)], env=env)
        assert out.exit_code == 2, out.output
        assert "--policies" in out.output and "Traceback" not in out.output
    assert head(sqlite_url) == before
    out = CliRunner().invoke(main, ["replay", ids[0], "--verify", "--policies", str(tmp_path)],
                             env=env)  # fmt: skip
    assert out.exit_code == 2 and "--verify cannot be combined" in out.output


def test_a_candidate_folder_with_a_model_moves_the_candidate_policies_to_it(
    policy_dir: Path, sqlite_url: str, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    ids = _record(policy_dir, sqlite_url, fake_api)[:1]
    folder = _candidate(policy_dir, tmp_path)
    report = _replay(
        sqlite_url, fake_api.base_url, ids, folder, live=False, model="claude-opus-4-6"
    )
    assert report.summary.mode is Mode.POLICIES
    assert report.title.endswith(" on claude-opus-4-6")
    (row,) = report.requests
    assert row.target_model == "claude-opus-4-6"
    candidate = _fingerprint(folder, "compliance_review")
    # The candidate moved to the model is a version of its own, named as the replayed side.
    assert row.replayed_policy not in (None, candidate, row.recorded_policy)
    assert "$.max_tokens" in {c.path for c in row.request_changes}
