"""The routing table (routes.toml): loaded with the folder, reviewed, fingerprinted, and the
most specific route wins; the policy's [model] choices are reviewed like its pinned model."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore
from gateway import Gateway, Settings
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.errors import PolicyViolation
from gateway.policy import ROUTES_TASK, PolicySet, chosen_model
from tests.policy.conftest import SHIPPED, TODAY, VALID, WriteFolder

HEAD = 'schema = 1\ndescription = "Routes for tests."\nowner = "tests"\n'


def route(caller: str, model: str, task: str) -> str:
    return f'\n[[route]]\ncaller = "{caller}"\nmodel = "{model}"\ntask = "{task}"\n'


def folder_with(write_folder: WriteFolder, routes: str, **tasks: str) -> PolicySet:
    files = {f"{name}.toml": text for name, text in tasks.items()}
    files.update({"routes.toml": routes, "prompts/system.md": "Be careful.\n"})
    return PolicySet.load(write_folder(files), Catalog.load(), today=TODAY)


def rules(policies: PolicySet) -> list[tuple[str, str, str]]:
    return [(f.rule, f.severity.value, f.key) for f in policies.findings]


def test_the_most_specific_route_wins(write_folder: WriteFolder) -> None:
    table = (
        HEAD
        + route("*", "*", "assistant")
        + route("*", "claude-opus-4-7", "research")
        + route("desk-7", "*", "desk")
        + route("desk-7", "claude-opus-4-7", "desk_research")
    )
    tasks = {name: VALID for name in ("assistant", "research", "desk", "desk_research")}
    policies = folder_with(write_folder, table, **tasks)
    routes = policies.routes
    assert routes is not None
    assert routes.route("anyone", "claude-sonnet-4-6").task == "assistant"  # type: ignore[union-attr]
    assert routes.route("anyone", "claude-opus-4-7").task == "research"  # type: ignore[union-attr]
    assert routes.route("desk-7", "claude-sonnet-4-6").task == "desk"  # type: ignore[union-attr]
    assert routes.route("desk-7", "claude-opus-4-7").task == "desk_research"  # type: ignore[union-attr]
    # '*' stands for current Claude models only: not a retired one, an offline one, a typo.
    for model in ("claude-mythos-preview", "local:ngram", "claude-sonet-4-6", "compliance"):
        assert routes.route("anyone", model) is None


def test_routes_toml_is_not_a_task_and_its_findings_join_the_review(
    write_folder: WriteFolder,
) -> None:
    table = HEAD + route("*", "*", "nowhere") + route("*", "claude-mythos-preview", "assistant")
    policies = folder_with(write_folder, table, assistant=VALID)
    assert policies.tasks() == ["assistant"]
    assert rules(policies) == [
        ("route-unknown-task", "error", "route[0].task"),
        ("route-model-unknown", "error", "route[1].model"),
    ]
    assert "retired" in policies.findings[1].message
    assert policies.routes is None  # a table with an error routes nothing


def test_a_route_to_a_model_its_task_cannot_use_is_flagged(write_folder: WriteFolder) -> None:
    chooser = VALID.replace(
        'id = "claude-sonnet-4-6"', 'id = "claude-sonnet-4-6"\nchoices = ["claude-opus-4-6"]'
    )
    table = (
        HEAD
        + route("*", "claude-opus-4-7", "assistant")  # pinned sonnet would answer
        + route("*", "claude-opus-4-6", "chooser")  # a choice: answered by it
    )
    policies = folder_with(write_folder, table, assistant=VALID, chooser=chooser)
    assert rules(policies) == [("route-model-substituted", "warning", "route[0].model")]
    assert "claude-sonnet-4-6" in policies.findings[0].message
    assert policies.routes is not None


def test_duplicate_routes_and_unknown_keys_are_errors(write_folder: WriteFolder) -> None:
    twice = HEAD + route("a", "*", "assistant") + route("a", "*", "assistant")
    assert rules(folder_with(write_folder, twice, assistant=VALID)) == [
        ("route-duplicate", "error", "route[1]")
    ]
    typo = HEAD + '\n[[route]]\ncaller = "*"\nmodel = "*"\ntask = "assistant"\npriority = 1\n'
    assert rules(folder_with(write_folder, typo, assistant=VALID)) == [
        ("routes-invalid", "error", "route.0.priority")
    ]


def test_the_fingerprint_covers_routes_not_their_order(write_folder: WriteFolder) -> None:
    one = route("*", "*", "a")
    two = route("*", "claude-opus-4-7", "b")
    tasks = {"a": VALID, "b": VALID}
    first = folder_with(write_folder, HEAD + one + two, **tasks).routes
    swapped = folder_with(write_folder, HEAD + two + one, **tasks).routes
    changed = folder_with(write_folder, HEAD + one + route("*", "claude-opus-4-7", "a"), **tasks)
    assert first is not None and swapped is not None and changed.routes is not None
    assert first.fingerprint == swapped.fingerprint
    assert first.fingerprint != changed.routes.fingerprint
    # Approvals sign it under its own name, beside the tasks' fingerprints.
    signed = changed.approvable()
    assert signed[ROUTES_TASK][0] == changed.routes.fingerprint
    assert signed["a"][0] == changed.get("a").fingerprint


def test_model_choices_are_reviewed_like_the_pinned_model(write_folder: WriteFolder) -> None:
    # temperature is refused on a model that honours no sampling, and an alias can move.
    choices = VALID.replace(
        'id = "claude-sonnet-4-6"',
        'id = "claude-sonnet-4-6"\nchoices = ["claude-opus-4-7", "claude-haiku-4-5"]',
    )
    policies = folder_with(write_folder, HEAD, chooser=choices)
    found = {(f.rule, f.key) for f in policies.findings}
    assert ("model-alias", "model.choices[1]") in found
    assert any(
        f.message.startswith("With the caller's model choice 'claude-opus-4-7'")
        for f in policies.findings
    )
    assert policies.entry("chooser").policy is None  # type: ignore[union-attr]


def test_a_caller_chooses_only_among_the_policys_models(write_folder: WriteFolder) -> None:
    chooser = VALID.replace(
        'id = "claude-sonnet-4-6"', 'id = "claude-sonnet-4-6"\nchoices = ["claude-opus-4-6"]'
    )
    policy = folder_with(write_folder, HEAD, chooser=chooser, plain=VALID).get("chooser")
    assert chosen_model(policy, {"model": "claude-opus-4-6", "max_tokens": 64}) == (
        "claude-opus-4-6",
        {"max_tokens": 64},
    )
    assert chosen_model(policy, None) == ("claude-sonnet-4-6", None)
    with pytest.raises(PolicyViolation) as caught:
        chosen_model(policy, {"model": "claude-opus-4-7"})
    assert caught.value.key == "model.choices"


def test_choices_left_unset_keep_the_fingerprint_and_a_migration_drops_them(
    write_folder: WriteFolder,
) -> None:
    chooser = VALID.replace(
        'id = "claude-sonnet-4-6"', 'id = "claude-sonnet-4-6"\nchoices = ["claude-opus-4-6"]'
    )
    policies = folder_with(write_folder, HEAD, chooser=chooser, plain=VALID)
    assert "model_choices" not in policies.get("plain").content()
    assert policies.get("chooser").content()["model_choices"] == ["claude-opus-4-6"]
    assert policies.get("chooser").on_model("local:ngram").model.allowed == ("local:ngram",)


def test_the_shipped_table_sends_any_current_claude_model_to_the_general_assistant(
    catalog: Catalog,
) -> None:
    policies = PolicySet.load(SHIPPED, catalog, today=TODAY)
    assert policies.routes is not None
    found = policies.routes.route("a-new-caller", "claude-sonnet-4-6")
    assert found is not None and found.task == "general_assistant"


def test_approvals_cover_the_routing_table_and_a_gateway_waits_for_them(
    write_folder: WriteFolder, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(db).close()
    files = {"task_a.toml": VALID, "prompts/system.md": "Answer briefly.\n"}
    folder = write_folder({**files, "routes.toml": HEAD + route("*", "*", "task_a")})
    # Approver pins are test_approver_pins.py's subject; here one key signs for both names.
    settings = Settings(
        policy_dir=folder,
        database_url=db,
        require_approvals=1,
        durability="os",
        unsafe_unpinned_approvers=True,
    )

    def run(*args: str) -> Result:
        env = {"GATEWAY_DATABASE_URL": db, "GATEWAY_APPROVER_KEY": secrets.token_hex(32),
               "GATEWAY_REQUIRE_APPROVALS": "1"}  # fmt: skip
        return CliRunner().invoke(main, list(args), env=env)

    first = run("policy", "approve", "task_a", "--approver", "alice", "--policy-dir", str(folder))
    assert first.exit_code == 0, first.output
    with Gateway(settings, offline=True) as gw:  # the unapproved table refuses routing only
        assert gw.policies.withheld() == ["routes"]
        assert gw.complete("task_a", "The reviewer reads the", caller="t").text is not None
    review = run("policy", "review", str(folder))
    assert "Routes (routes.toml, sha256:" in review.output
    assert "Not approved: routes" in review.output
    approved = run("policy", "approve", "routes", "--approver", "bob", "--policy-dir", str(folder))
    assert approved.exit_code == 0, approved.output
    with Gateway(settings, offline=True) as gw:  # the table's exact fingerprint is approved now
        assert gw.policies.withheld() == []
    reviewed = json.loads(run("policy", "review", str(folder), "--format", "json").output)
    assert reviewed["routes"]["approvals"]["approvers"] == ["bob"]
    # A changed table is another fingerprint: its approval is needed again.
    (folder / "routes.toml").write_text(HEAD + route("ops", "*", "task_a"))
    with Gateway(settings, offline=True) as gw:
        assert gw.policies.withheld() == ["routes"]


def test_offline_no_caller_can_choose_a_model_that_leaves_the_machine(
    write_folder: WriteFolder, tmp_path: Path
) -> None:
    chooser = VALID.replace(
        'id = "claude-sonnet-4-6"', 'id = "claude-sonnet-4-6"\nchoices = ["claude-opus-4-6"]'
    )
    folder = write_folder({"chooser.toml": chooser, "prompts/system.md": "Answer briefly.\n"})
    settings = Settings(policy_dir=folder, database_url=f"sqlite:///{tmp_path / 'a.db'}")
    with Gateway(settings, offline=True) as gw:
        with pytest.raises(PolicyViolation) as caught:
            gw.complete("chooser", "Hello", caller="t", overrides={"model": "claude-opus-4-6"})
        assert caught.value.key == "model.choices"
        assert gw.complete("chooser", "Hello", caller="t").model == "local:ngram"
