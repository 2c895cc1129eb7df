"""A reviewer's record (an export, checkpoint or access event) does not change what a real
request shows: one carrying a real request's id made `audit list` show that request as
"export". The PostgreSQL reviewer role may append exactly these kinds, with any request id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit import AuditStore, EventDraft, EventKind
from gateway.cli import main
from tests.gateway.conftest import MakeGateway


@pytest.mark.parametrize("kind", [EventKind.EXPORT, EventKind.CHECKPOINT, EventKind.ACCESS])
def test_a_reviewer_event_under_a_real_request_id_keeps_the_request_status(
    make_gateway: MakeGateway, db_path: Path, kind: EventKind
) -> None:
    url = f"sqlite:///{db_path}"
    gw = make_gateway(offline=True)
    real = gw.complete("compliance_review", "Transaction: 7 EUR to ACME", caller="desk")
    gw.close()
    with AuditStore.open(url) as store:
        store.append(EventDraft(kind=kind, request_id=real.request_id, caller="reviewer"))
    listed = CliRunner().invoke(
        main, ["audit", "list", "--format", "json"], env={"GATEWAY_DATABASE_URL": url}
    )
    assert listed.exit_code == 0, listed.output
    rows = {r["request_id"]: r for r in json.loads(listed.output)}
    assert rows[real.request_id]["status"] == "completed"


def test_a_reviewer_record_of_its_own_is_still_listed_as_what_it_is(
    make_gateway: MakeGateway, db_path: Path
) -> None:
    url = f"sqlite:///{db_path}"
    make_gateway(offline=True).complete("compliance_review", "Transaction: 7 EUR to ACME")
    with AuditStore.open(url) as store:
        store.append(EventDraft(kind=EventKind.EXPORT, request_id="export-1", caller="reviewer"))
    listed = CliRunner().invoke(
        main, ["audit", "list", "--format", "json"], env={"GATEWAY_DATABASE_URL": url}
    )
    rows = {r["request_id"]: r for r in json.loads(listed.output)}
    assert rows["export-1"]["status"] == "export"
