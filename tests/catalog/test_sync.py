"""`gateway models sync`: models.list against the loopback fake -> a reviewable override file."""

from __future__ import annotations

import http.client
import json
import tomllib
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gateway.catalog import Catalog, ModelInfo
from gateway.catalog.sync import ListedModel, compare, render_override
from gateway.cli import main
from tests.fakes.messages_api import FakeMessagesAPI, Reply, model_entry

API_KEY = "sk-ant-test-sync-0123456789abcdef"
SHIPPED = Catalog.load()
ON = date(2026, 12, 1)


def listed_like(info: ModelInfo, **changes: Any) -> dict[str, Any]:
    """The models.list entry that agrees with the catalog entry, with ``changes`` applied."""
    facts: dict[str, Any] = {
        "lifecycle": info.lifecycle,
        "retires_at": info.retires_at.isoformat() if info.retires_at else None,
        "max_tokens": info.max_output_tokens,
        "max_input_tokens": info.context_window,
        "thinking_types": info.thinking_types,
        "effort_levels": info.effort_levels,
        "structured_outputs": info.structured_outputs,
    }
    return model_entry(info.id, **{**facts, **changes})


def current_list() -> list[dict[str, Any]]:
    """What models.list would say if the shipped catalog were exactly current."""
    return [listed_like(m) for m in SHIPPED if m.provider == "anthropic" and m.alias_of is None]


def with_changes() -> list[dict[str, Any]]:
    """A retirement date moves (Opus 4.5) and a model the catalog does not know appears."""
    entries = [e for e in current_list() if e["id"] != "claude-opus-4-5-20251101"]
    opus45 = SHIPPED.get("claude-opus-4-5-20251101")
    assert opus45 is not None
    entries.append(listed_like(opus45, retires_at="2027-03-01"))
    entries.insert(0, model_entry("claude-opus-6", thinking_types=("adaptive", "disabled")))
    return entries


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(fake: FakeMessagesAPI, *args: str, key: str | None = API_KEY) -> tuple[int, str, str]:
    env = {
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "GATEWAY_CATALOG_OVERRIDE": None,
        "ANTHROPIC_AUTH_TOKEN": None,
    }
    result = CliRunner().invoke(main, ["models", "sync", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


# -- the fake's models.list -------------------------------------------------------------------


def _get(fake: FakeMessagesAPI, query: str) -> dict[str, Any]:
    host, port = fake.base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request("GET", f"/v1/models?{query}")
        answer = connection.getresponse()
        assert answer.status == 200
        body: dict[str, Any] = json.loads(answer.read())
    finally:
        connection.close()
    return body


def test_fake_pages_like_the_api(fake_api: FakeMessagesAPI) -> None:
    fake_api.set_models(
        [model_entry(f"m{i}") for i in range(5)]
        + [model_entry("gone", lifecycle="retired", retires_at="2026-01-01")]
    )
    first = _get(fake_api, "limit=2")
    assert [m["id"] for m in first["data"]] == ["m0", "m1"]
    assert (first["has_more"], first["first_id"], first["last_id"]) == (True, "m0", "m1")
    last = _get(fake_api, "limit=2&after_id=m3")
    assert ([m["id"] for m in last["data"]], last["has_more"]) == (["m4"], False)
    before = _get(fake_api, "limit=2&before_id=m3")
    assert [m["id"] for m in before["data"]] == ["m1", "m2"]
    # retired models only when asked for, in the SDK's bracket format
    assert "gone" not in [m["id"] for m in _get(fake_api, "limit=100")["data"]]
    asked = _get(fake_api, "limit=100&lifecycle%5B%5D=retired")
    assert [m["id"] for m in asked["data"]] == ["gone"]


def test_the_sdk_reads_every_page_of_the_fake(fake_api: FakeMessagesAPI) -> None:
    import anthropic

    fake_api.set_models([model_entry(f"m{i}") for i in range(5)])
    client = anthropic.Anthropic(api_key=API_KEY, base_url=fake_api.base_url, max_retries=0)
    try:
        ids = [m.id for m in client.models.list(limit=2)]
    finally:
        client.close()
    assert ids == ["m0", "m1", "m2", "m3", "m4"]
    assert len(fake_api.requests) == 3  # three pages


# -- the library ------------------------------------------------------------------------------


def _listed(entries: list[dict[str, Any]]) -> list[ListedModel]:
    import anthropic.types

    return [ListedModel.from_sdk(anthropic.types.ModelInfo.model_validate(e)) for e in entries]


def test_a_current_catalog_has_nothing_to_say() -> None:
    report = compare(SHIPPED, _listed(current_list()), on=ON)
    assert not report.changed
    assert report.entries == {}


def test_override_moves_the_date_adds_the_model_and_keeps_sampling(tmp_path: Path) -> None:
    report = compare(SHIPPED, _listed(with_changes()), on=ON)
    assert [(m.id, m.new) for m in report.models] == [
        ("claude-opus-4-5-20251101", False),
        ("claude-opus-6", True),
    ]
    assert [(c.fact, c.old, c.new) for c in report.models[0].changes] == [
        ("retires_at", date(2027, 1, 22), date(2027, 3, 1))
    ]
    path = tmp_path / "override.toml"
    path.write_text(render_override(report), "utf-8")
    loaded = Catalog.load(path)

    opus45, shipped45 = (
        loaded.get("claude-opus-4-5-20251101"),
        SHIPPED.get("claude-opus-4-5-20251101"),
    )
    assert opus45 is not None and shipped45 is not None
    assert opus45.retires_at == date(2027, 3, 1)
    assert opus45.sources["retires_at"] == "models.list on 2026-12-01"
    # every curated fact, sampling first, is exactly the shipped one, sources included
    assert opus45.model_dump(exclude={"retires_at", "sources"}) == shipped45.model_dump(
        exclude={"retires_at", "sources"}
    )
    for fact in ("sampling", "top_k", "api_version", "pinned"):
        assert opus45.sources[fact] == shipped45.sources[fact]
    # the alias follows its target's new date
    alias = loaded.get("claude-opus-4-5")
    assert alias is not None and alias.retires_at == date(2027, 3, 1)

    new = loaded.get("claude-opus-6")
    assert new is not None
    assert (new.sampling, new.top_k, new.api_version) == ("none", False, "2026-10-21")
    assert "curated by hand" in new.sources["sampling"]
    assert "curated by hand" in new.sources["top_k"]
    assert new.sources["max_output_tokens"] == "models.list on 2026-12-01"
    assert new.thinking_types == ("adaptive", "disabled")

    # nothing else moved: every other model is the shipped one
    for info in SHIPPED:
        if info.id not in ("claude-opus-4-5-20251101", "claude-opus-4-5"):
            assert loaded.get(info.id) == info, info.id


def test_a_retired_model_without_a_date_keeps_the_catalog_date() -> None:
    sonnet45 = SHIPPED.get("claude-sonnet-4-5-20250929")
    assert sonnet45 is not None and sonnet45.retires_at is not None
    listed = _listed([listed_like(sonnet45, lifecycle="retired", retires_at=None)])
    report = compare(SHIPPED, listed, on=ON)
    assert [(c.fact, c.new) for c in report.models[0].changes] == [("lifecycle", "retired")]
    assert report.entries["claude-sonnet-4-5-20250929"]["retires_at"] == sonnet45.retires_at


def test_an_active_model_whose_retirement_was_lifted_loses_the_date() -> None:
    opus45 = SHIPPED.get("claude-opus-4-5-20251101")
    assert opus45 is not None
    listed = _listed([listed_like(opus45, lifecycle="active", retires_at=None)])
    report = compare(SHIPPED, listed, on=ON)
    assert {c.fact: c.new for c in report.models[0].changes} == {
        "lifecycle": "active",
        "retires_at": None,
    }
    assert "retires_at" not in report.entries["claude-opus-4-5-20251101"]


def test_capability_order_is_not_a_change() -> None:
    sonnet46 = SHIPPED.get("claude-sonnet-4-6")
    assert sonnet46 is not None
    reordered = tuple(reversed(sonnet46.thinking_types))
    report = compare(SHIPPED, _listed([listed_like(sonnet46, thinking_types=reordered)]), on=ON)
    assert not report.changed


def test_rendered_toml_round_trips_awkward_text() -> None:
    report = compare(SHIPPED, _listed(with_changes()), on=ON)
    entries = dict(report.entries)
    awkward = 'quote " backslash \\ tab \t del \x7f é — 中'
    entries["claude-opus-6"] = {**entries["claude-opus-6"], "sources": {"sampling": awkward}}
    text = render_override(report.model_copy(update={"entries": entries}))
    parsed = tomllib.loads(text)
    assert parsed["models"]["claude-opus-6"]["sources"]["sampling"] == awkward
    assert parsed["models"]["claude-opus-4-5-20251101"]["retires_at"] == date(2027, 3, 1)


# -- the command ------------------------------------------------------------------------------


def test_sync_writes_an_override_the_catalog_reads_and_exits_1(
    fake_api: FakeMessagesAPI, workdir: Path
) -> None:
    fake_api.set_models(with_changes())
    code, out, err = run(fake_api)
    assert code == 1, err
    assert "claude-opus-4-5-20251101: retires_at 2027-01-22 -> 2027-03-01" in out
    assert "claude-opus-6: NEW" in out
    loaded = Catalog.load(workdir / "models.override.toml")
    shipped = SHIPPED.get("claude-sonnet-4-6")
    assert loaded.get("claude-sonnet-4-6") == shipped
    opus45 = loaded.get("claude-opus-4-5-20251101")
    assert opus45 is not None and opus45.sampling == "temperature-or-top-p" and opus45.top_k
    # the client was built from the settings: the key as a bearer token, to the fake
    (request,) = [r for r in fake_api.requests if r.path.startswith("/v1/models")]
    assert request.method == "GET"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"


def test_nothing_changed_exits_0_and_writes_nothing(
    fake_api: FakeMessagesAPI, workdir: Path
) -> None:
    fake_api.set_models(current_list())
    code, out, err = run(fake_api)
    assert code == 0, err
    assert "the catalog is current" in out
    assert list(workdir.iterdir()) == []


def test_a_rerun_leaves_the_file_alone_and_keeps_hand_curated_sampling(
    fake_api: FakeMessagesAPI, workdir: Path
) -> None:
    fake_api.set_models(with_changes())
    assert run(fake_api)[0] == 1
    path = workdir / "models.override.toml"
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    code, out, _ = run(fake_api)
    assert code == 0 and "the catalog is current" in out
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before

    # a reviewer curates the new model's sampling; the API then changes one of its limits
    text = path.read_text("utf-8")
    curated = text.replace(
        '[models."claude-opus-6"]\nprovider = "anthropic"\npinned = true\n'
        'api_version = "2026-10-21"\nsampling = "none"',
        '[models."claude-opus-6"]\nprovider = "anthropic"\npinned = true\n'
        'api_version = "2023-06-01"\nsampling = "temperature-or-top-p"',
    )
    assert curated != text
    path.write_text(curated, "utf-8")
    entries = with_changes()
    entries[0] = model_entry(
        "claude-opus-6", thinking_types=("adaptive", "disabled"), max_tokens=256000
    )
    fake_api.set_models(entries)
    code, out, err = run(fake_api)
    assert code == 1, err
    assert "claude-opus-6: max_output_tokens 128000 -> 256000" in out
    loaded = Catalog.load(path)
    opus6 = loaded.get("claude-opus-6")
    assert opus6 is not None
    assert (opus6.sampling, opus6.api_version, opus6.max_output_tokens) == (
        "temperature-or-top-p",
        "2023-06-01",
        256000,
    )
    opus45 = loaded.get("claude-opus-4-5-20251101")  # carried from the first run
    assert opus45 is not None and opus45.retires_at == date(2027, 3, 1)


def test_json_summary_and_toml_on_stdout(fake_api: FakeMessagesAPI, workdir: Path) -> None:
    fake_api.set_models(with_changes())
    code, out, err = run(fake_api, "-o", "-", "--format", "json")
    assert code == 1
    assert tomllib.loads(out)["models"]["claude-opus-6"]["sampling"] == "none"
    summary = json.loads(err)
    assert summary["changed"] is True and summary["written"] == "-"
    assert [m["id"] for m in summary["models"]] == ["claude-opus-4-5-20251101", "claude-opus-6"]
    assert summary["models"][0]["changes"] == [
        {"fact": "retires_at", "old": "2027-01-22", "new": "2027-03-01"}
    ]
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize(
    "fault",
    [
        Reply.error(500),
        Reply.error(401, message=f"invalid x-api-key {API_KEY}"),
        Reply.malformed(),
        Reply.drop(),
    ],
    ids=["500", "401-echoing-the-key", "malformed", "dropped"],
)
def test_api_failure_exits_3_with_one_line(
    fake_api: FakeMessagesAPI, workdir: Path, fault: Reply
) -> None:
    fake_api.set_models(with_changes())
    fake_api.script(fault)
    code, out, err = run(fake_api)
    assert code == 3, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: models.list failed: ")
    assert "Traceback" not in err
    assert list(workdir.iterdir()) == []


def test_the_key_never_appears_in_any_output(fake_api: FakeMessagesAPI, workdir: Path) -> None:
    fake_api.set_models(with_changes())
    outputs = [run(fake_api), run(fake_api, "--format", "json"), run(fake_api, "-o", "-")]
    fake_api.script(Reply.error(403, message=f"key {API_KEY} may not list models"))
    outputs.append(run(fake_api))
    # the second run finds the first run's file current (exit 0); '-o -' compares to shipped
    assert [code for code, _, _ in outputs] == [1, 0, 1, 3]
    for _, out, err in outputs:
        assert API_KEY not in out and API_KEY not in err
    assert API_KEY not in (workdir / "models.override.toml").read_text("utf-8")


def test_no_key_is_one_line_naming_the_variable(fake_api: FakeMessagesAPI, workdir: Path) -> None:
    code, out, err = run(fake_api, key=None)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "ANTHROPIC_API_KEY" in err
    assert fake_api.requests == []


def test_usage_error_exits_2(fake_api: FakeMessagesAPI, workdir: Path) -> None:
    code, _, err = run(fake_api, "--format", "yaml")
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert fake_api.requests == []
