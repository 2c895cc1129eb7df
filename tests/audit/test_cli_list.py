"""`gateway audit list` for an auditor: every outcome named, model/tokens/latency, the
derivation label, and a footer whenever rows were left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from gateway import Settings
from gateway.auditing import record_signer
from gateway.cli import main

RESPONSE_DATA = {
    "ok": True,
    "model": "claude-sonnet-4-6",
    "latency_ms": 812.5,
    "usage": {"input_tokens": 40, "output_tokens": 12},
}


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:

        def request(rid: str, outcome: EventKind | None, data: dict[str, object]) -> None:
            rhash = "sha256:" + rid[-1] * 64
            store.append(
                EventDraft(
                    kind=EventKind.REQUEST, request_id=rid, task="compliance_review",
                    caller="svc", request_hash=rhash,
                    data={"model_id": "claude-sonnet-4-6",
                          **({"derived": {"label": "experiment:hot",
                                          "reviewed_fingerprint": "sha256:" + "0" * 64}}
                             if rid == "r-exp1" else {})},
                )
            )  # fmt: skip
            if outcome is not None:
                store.append(
                    EventDraft(
                        kind=outcome, request_id=rid, task="compliance_review", caller="svc",
                        request_hash=rhash, data=data,
                    )
                )  # fmt: skip

        request("r-good1", EventKind.RESPONSE, RESPONSE_DATA)
        request("r-bad2", EventKind.RESPONSE, {**RESPONSE_DATA, "ok": False})
        request("r-gone3", EventKind.CANCELLED, {"reason": "closed", "answered": False})
        request("r-exp1", EventKind.RESPONSE, RESPONSE_DATA)
        store.append(
            EventDraft(
                kind=EventKind.INTEGRITY_ALERT, request_id="r-alert", task="compliance_review",
                caller="svc", data={"served_seq": 1, "check": "served_answer", "problems": ["x"]},
            )
        )  # fmt: skip
    return url


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GATEWAY_DATABASE_URL": url})


def test_every_outcome_has_its_own_status(url: str) -> None:
    rows = json.loads(run(url, "audit", "list", "--format", "json").stdout)
    assert {r["request_id"]: r["status"] for r in rows} == {
        "r-good1": "completed",
        "r-bad2": "flagged",
        "r-gone3": "cancelled",
        "r-exp1": "completed",
        "r-alert": "integrity alert",
    }


def test_rows_carry_model_tokens_latency_and_label(url: str) -> None:
    rows = {r["request_id"]: r for r in json.loads(run(url, "audit", "list", "--format",
                                                       "json").stdout)}  # fmt: skip
    good = rows["r-good1"]
    assert good["model"] == "claude-sonnet-4-6"
    assert (good["input_tokens"], good["output_tokens"], good["latency_ms"]) == (40, 12, 812.5)
    assert rows["r-exp1"]["label"] == "experiment:hot"
    assert rows["r-gone3"]["input_tokens"] is None
    table = run(url, "audit", "list").stdout
    line = next(x for x in table.splitlines() if "r-good1" in x)
    assert "claude-sonnet-4-6" in line and "40/12" in line and "812 ms" in line
    assert "1-2" in line  # first and last seq of the request
    assert "experiment:hot" in next(x for x in table.splitlines() if "r-exp1" in x)


def test_a_cut_listing_says_how_much_was_left_out(url: str) -> None:
    table = run(url, "audit", "list", "--limit", "2").stdout.splitlines()
    assert table[-1] == "2 of 5 (use --limit N or --all)"
    assert len(table) == 1 + 2 + 1
    everything = run(url, "audit", "list", "--all").stdout.splitlines()
    assert len(everything) == 1 + 5 and "of" not in everything[-1].split()[:2]
    jsonl = run(url, "audit", "list", "--limit", "2", "--format", "jsonl").stdout.splitlines()
    assert len(jsonl) == 2  # machine formats carry rows only
    assert len(json.loads(run(url, "audit", "list", "--all", "--format", "json").stdout)) == 5
