"""Coverage in the evidence: `audit list` and `audit usage` say whether each task's traffic
ran under a strict or an opened caller contract, and `audit show` which parts a request's
caller brought, read from the recorded policy content and the REQUEST's overrides (so a
log from before caller contracts reads as strict, with nothing caller-supplied)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from audit.canonical import canonical_digest
from gateway import Settings
from gateway.catalog import Catalog
from gateway.cli import main
from gateway.keys import record_signer
from gateway.policy import PolicySet, caller_parts, contract_of

SHIPPED = Path(__file__).resolve().parents[2] / "policies"


def _strict_content() -> dict[str, Any]:
    return PolicySet.load(SHIPPED, Catalog.load()).get("compliance_review").content()


def _opened_content() -> dict[str, Any]:
    content = _strict_content()
    content["task"] = "assistant"
    content["caller"] = {
        **content.get("caller", {}),
        "system": {"mode": "append", "max_bytes": 65536},
        "tools": {"allow": ["*"], "max_count": 8},
    }
    return content


def _request(
    store: AuditStore, rid: str, task: str, content: dict[str, Any], requested: dict[str, Any]
) -> None:
    common = {
        "request_id": rid,
        "task": task,
        "caller": "desk-a",
        "request_hash": "sha256:" + rid.encode().hex().ljust(64, "0"),
        "policy_fingerprint": canonical_digest(content),
    }
    data = {"model_id": "claude-sonnet-4-6", "requested": requested}
    store.append(EventDraft(kind=EventKind.REQUEST, data=data, policy_content=content, **common))
    usage = {"input_tokens": 10, "output_tokens": 5}
    answer = {"ok": True, "model": "claude-sonnet-4-6", "usage": usage}
    store.append(EventDraft(kind=EventKind.RESPONSE, data=answer, **common))


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:
        _request(store, "r-strict", "compliance_review", _strict_content(), {"max_tokens": 900})
        brought = {
            "system": "You help the payments desk.",
            "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
            "output_format": {"type": "json_schema", "schema": {"type": "object"}},
            "betas": ["context-management-2025-06-27"],
        }
        _request(store, "r-opened", "assistant", _opened_content(), brought)
        _request(store, "r-opened-plain", "assistant", _opened_content(), {})
    return url


def run(url: str, *args: str) -> str:
    result = CliRunner().invoke(
        main, list(args), env={"GATEWAY_DATABASE_URL": url, "GATEWAY_POLICY_DIR": str(SHIPPED)}
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_list_says_which_contract_each_request_ran_under(url: str) -> None:
    rows = {r["request_id"]: r for r in json.loads(run(url, "audit", "list", "--format", "json"))}
    assert rows["r-strict"]["contract"] == "strict"
    assert rows["r-opened"]["contract"] == "opened"
    assert rows["r-opened"]["requested"] == ["betas", "output_format", "system", "tools"]
    table = run(url, "audit", "list")
    lines = table.splitlines()
    assert "contract" in lines[1]  # the second line of each entry
    at = next(n for n, line in enumerate(lines) if line.endswith("r-strict"))
    assert lines[at + 1].endswith("strict")


def test_usage_per_task_counts_strict_and_opened_traffic(url: str) -> None:
    report = json.loads(run(url, "audit", "usage", "--by", "task", "--format", "json"))
    rows = {r["key"]: r for r in report["rows"]}
    assert rows["compliance_review"]["contracts"] == {"strict": 1}
    assert rows["assistant"]["contracts"] == {"opened": 2}
    assert report["total"]["contracts"] == {"opened": 2, "strict": 1}
    table = run(url, "audit", "usage", "--by", "task")
    assert next(line for line in table.splitlines() if line.startswith("assistant")).count("opened")
    assert "mixed" in next(line for line in table.splitlines() if line.startswith("total"))


def test_show_names_the_parts_the_caller_brought(url: str) -> None:
    shown = json.loads(run(url, "audit", "show", "r-opened", "--format", "json"))
    assert shown["coverage"] == {
        "contract": "opened",
        "caller_supplied": ["system prompt", "tools", "schema", "betas"],
    }
    text = run(url, "audit", "show", "r-strict")
    assert "contract strict; caller-supplied: nothing" in text
    plain = run(url, "audit", "show", "r-opened-plain")
    assert "contract opened; caller-supplied: nothing" in plain


def test_old_records_read_as_strict_with_nothing_caller_supplied() -> None:
    # Content recorded before caller contracts has no such [caller] keys; a REQUEST of then
    # recorded only generation values as overrides.
    assert contract_of({"caller": {"max_tokens": {"min": 1, "max": 9}}}) == "strict"
    assert contract_of({"task": "t"}) == "strict"
    assert contract_of(None) is None
    assert contract_of({"caller": {"system": {"mode": "policy"}}}) == "strict"
    assert caller_parts({"max_tokens": 900, "temperature": 0.2}) == ()
    assert caller_parts(None) == ()
