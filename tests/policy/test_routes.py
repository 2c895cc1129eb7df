"""The routing table (routes.toml): loaded with the folder, reviewed, fingerprinted, and the
most specific route wins; the policy's [model] choices are reviewed like its pinned model."""

from __future__ import annotations

import pytest

from gateway.catalog import Catalog
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
