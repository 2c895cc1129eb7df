"""`audit list` for a reviewer: --status picks outcomes (flagged, alerted, failed, cancelled,
rejected) without grep; --until DATE includes that day; each entry fits 120 characters and
never cuts the model id, however long the other columns are."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from audit import AuditStore, EventDraft, EventKind
from gateway import Settings
from gateway.cli import main
from gateway.keys import record_signer

LONG_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"  # a Bedrock id: 42 characters


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    signer = record_signer(Settings(database_url=url), create=True)
    with AuditStore.open(url, signer=signer) as store:

        def request(rid: str, *outcomes: tuple[EventKind, dict[str, object]]) -> None:
            common = {"request_id": rid, "task": "a_rather_long_task_name_for_reviews",
                      "caller": "payments-settlement-service-eu-west"}  # fmt: skip
            store.append(EventDraft(kind=EventKind.REQUEST, data={"model_id": LONG_MODEL},
                                    **common))  # fmt: skip
            for kind, data in outcomes:
                store.append(EventDraft(kind=kind, data=data, **common))

        answer = {"ok": True, "model": LONG_MODEL}
        request("r-ok", (EventKind.RESPONSE, answer))
        request("r-flagged", (EventKind.RESPONSE, {**answer, "ok": False}))
        request("r-alerted", (EventKind.RESPONSE, {**answer, "model": "claude-opus-4-6"}),
                (EventKind.ANSWER_ALERT, {"check": "model"}))  # fmt: skip
        request("r-failed", (EventKind.FAILED, {"error": "UpstreamRejected"}))
        request("r-gone", (EventKind.CANCELLED, {"reason": "closed", "answered": False}))
        store.append(EventDraft(kind=EventKind.REJECTED, request_id="r-refused", task="kyc",
                                caller="svc", data={"key": "tools"}))  # fmt: skip
    return url


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, ["audit", "list", *args], env={"GATEWAY_DATABASE_URL": url})


def ids(url: str, *args: str) -> list[str]:
    out = run(url, *args, "--format", "json")
    assert out.exit_code == 0, out.output
    return [r["request_id"] for r in json.loads(out.stdout)]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("flagged", ["r-flagged"]),
        ("alerted", ["r-alerted"]),
        ("failed", ["r-failed"]),
        ("cancelled", ["r-gone"]),
        ("rejected", ["r-refused"]),
        ("completed", ["r-ok"]),
    ],
)
def test_status_picks_one_outcome(url: str, status: str, expected: list[str]) -> None:
    assert ids(url, "--status", status) == expected


def test_statuses_combine_and_the_table_counts_what_it_kept(url: str) -> None:
    assert ids(url, "--status", "flagged", "--status", "alerted") == ["r-flagged", "r-alerted"]
    table = run(url, "--status", "failed", "--status", "rejected", "--limit", "1").stdout
    assert table.splitlines()[-1] == "1 of 2 (use --limit N or --all)"
    bad = run(url, "--status", "weird")
    assert bad.exit_code == 2 and "weird" in bad.output


def test_until_a_date_includes_that_day(url: str) -> None:
    today = datetime.now(UTC).date()
    assert len(ids(url, "--until", today.isoformat())) == 6
    assert ids(url, "--until", (today - timedelta(days=1)).isoformat()) == []
    # With a time it stays an exclusive bound.
    assert ids(url, "--until", f"{today.isoformat()}T00:00:00") == []


def test_each_entry_fits_120_characters_and_never_cuts_the_model(url: str) -> None:
    table = run(url, "--all").stdout.splitlines()
    assert all(len(line) <= 120 for line in table), max(table, key=len)
    entry = next(line for line in table if line.endswith("  r-ok"))
    assert LONG_MODEL in entry
    # The alerted answer shows the model that answered: the finding, whole.
    assert "  claude-opus-4-6  " in next(line for line in table if line.endswith("  r-alerted"))
