"""Files the gateway creates that hold the log or a key are its owner's alone (0600).

The SQLite database holds prompts and answers; SQLite made it (and its -wal and -shm files)
0644 under the usual umask, so any local user could read every recorded answer. The record
key beside it signs the log.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit import AuditStore
from tests.gateway.conftest import MakeGateway


@pytest.fixture
def usual_umask() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("usual_umask")
def test_the_database_its_wal_and_shm_and_the_record_key_are_created_0600(
    db_path: Path, make_gateway: MakeGateway
) -> None:
    gw = make_gateway()
    gw.complete("compliance_review", "Transaction: 7 EUR to ACME")
    folder = db_path.parent
    created = [db_path, folder / "audit.db-wal", folder / "audit.db-shm"]
    created.append(folder / "gateway-record.key")
    assert {p.name: oct(mode(p)) for p in created} == {p.name: "0o600" for p in created}


@pytest.mark.usefixtures("usual_umask")
def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    AuditStore.open(f"sqlite:///{db}").close()
    db.chmod(0o640)  # the operator's choice, say a group of auditors
    AuditStore.open(f"sqlite:///{db}").close()
    assert mode(db) == 0o640
