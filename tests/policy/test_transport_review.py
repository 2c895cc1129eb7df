"""A task moved between transports is a policy diff whose risk notes say where the data goes,
what replay keeps and which features are lost or kept; `policy show` names the transport and
shows the request as it goes there (the transport's id and API version in the body)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gateway.catalog import Catalog
from gateway.cli import main
from gateway.policy import PolicySet, diff_policy_sets
from tests.policy.conftest import TODAY, VALID, WriteFolder

PROMPT = {"prompts/system.md": "Be careful.\n"}
ON_BEDROCK = VALID.replace(
    'id = "claude-sonnet-4-6"\n',
    'id = "claude-sonnet-4-6"\ntransport = "bedrock"\n'
    'transport_id = "eu.anthropic.claude-sonnet-4-6"\nregion = "eu-central-1"\n',
)
ON_VERTEX = VALID.replace(
    'id = "claude-sonnet-4-6"\n',
    'id = "claude-sonnet-4-6"\ntransport = "vertex"\nregion = "europe-west1"\n',
)


def _risks(write_folder: WriteFolder, catalog: Catalog, old: str, new: str) -> dict[str, str]:
    before = PolicySet.load(write_folder({**PROMPT, "task.toml": old}), catalog, today=TODAY)
    after = PolicySet.load(write_folder({**PROMPT, "task.toml": new}), catalog, today=TODAY)
    (diff,) = diff_policy_sets(before, after)
    assert diff.status == "changed"
    return {change.key: change.risk or "" for change in diff.changes}


def test_a_move_to_bedrock_says_what_is_lost_kept_and_where_data_goes(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    risks = _risks(write_folder, catalog, VALID, ON_BEDROCK)
    assert set(risks) == {"transport", "transport_id", "region"}
    moved = risks["transport"]
    assert "from anthropic to bedrock" in moved
    assert "lost: token counting, inference_geo" in moved
    assert "prompt caching" in moved and "bedrock-2023-05-31" in moved
    assert "not replayed" in moved
    assert "eu-central-1" in risks["region"] and "processed" in risks["region"]
    assert "inference profile" in risks["transport_id"]


def test_a_move_between_clouds_keeps_token_counting_only_where_offered(
    write_folder: WriteFolder, catalog: Catalog
) -> None:
    to_vertex = _risks(write_folder, catalog, ON_BEDROCK, ON_VERTEX)["transport"]
    assert "from bedrock to vertex" in to_vertex and "gained: token counting" in to_vertex
    back = _risks(write_folder, catalog, ON_VERTEX, VALID)["transport"]
    assert "from vertex to anthropic" in back and "gained: inference_geo" in back


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for var in ("GATEWAY_POLICY_DIR", "GATEWAY_CATALOG_OVERRIDE"):
        monkeypatch.delenv(var, raising=False)
    return CliRunner()


def test_policy_show_names_the_transport_and_its_request(
    runner: CliRunner, write_folder: WriteFolder
) -> None:
    folder = write_folder({**PROMPT, "task.toml": ON_BEDROCK})
    text = runner.invoke(main, ["policy", "show", "task", "--policy-dir", str(folder)])
    assert text.exit_code == 0, text.output
    assert "bedrock: model id eu.anthropic.claude-sonnet-4-6, region eu-central-1" in text.output
    shown = runner.invoke(
        main, ["policy", "show", "task", "--policy-dir", str(folder), "--format", "json"]
    )
    data = json.loads(shown.output)
    assert data["transport"] == {
        "name": "bedrock",
        "model_id": "eu.anthropic.claude-sonnet-4-6",
        "region": "eu-central-1",
    }
    body = data["request_template"]["body"]
    assert body["model"] == "eu.anthropic.claude-sonnet-4-6"
    assert body["anthropic_version"] == data["api_version"] == "bedrock-2023-05-31"


def test_policy_show_of_a_first_party_task_says_anthropics_api(
    runner: CliRunner, write_folder: WriteFolder
) -> None:
    folder = write_folder({**PROMPT, "task.toml": VALID})
    shown = runner.invoke(
        main, ["policy", "show", "task", "--policy-dir", str(folder), "--format", "json"]
    )
    data = json.loads(shown.output)
    assert data["transport"]["name"] is None and data["provider"] == "anthropic"
    assert "anthropic_version" not in data["request_template"]["body"]
