"""Each of verify's structural checks of a format-2 log, caught on its own (review 2, item 6).

One tamper per check on an intact, integrated log of three request/response pairs (seqs
1-6, a checkpoint at 6): by the tables' owner with the triggers off (Raw.unguard), or by the
application role with INSERT alone. Each test names the defect the check makes; with the
check removed from audit/verify/_sequenced.py (the review's mutant, and the root,
body-hash, chain-top and truncation checks) the test fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.store.models import DefectKind
from tests.audit.conftest import Raw
from tests.audit.test_sequenced_security import WRITER, begin, forge, integrate, kinds, role, verify
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.postgres

ZERO = "sha256:" + "0" * 64


def request_hash(n: int) -> str:
    return "sha256:" + f"{n + 1:02x}" * 32


@pytest.fixture
def log(pg_url: str) -> Iterator[Raw]:
    """An intact format-2 log, linked and checkpointed at 6; the owner's raw connection."""
    begin(pg_url)
    with AuditStore.open(pg_url, signer=WRITER) as store:
        for n in range(3):
            common = {"request_id": f"r{n}", "request_hash": request_hash(n)}
            store.append(EventDraft(kind=EventKind.REQUEST, data={}, **common))
            store.append(EventDraft(kind=EventKind.RESPONSE, data={"ok": True}, **common))
    integrate(pg_url)
    assert verify(pg_url).ok
    raw = Raw(pg_url)
    raw.unguard()
    yield raw
    raw.close()


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        pytest.param(
            [f"UPDATE chain SET prev_hash = '{ZERO}' WHERE seq = 3"],
            (3, DefectKind.BROKEN_LINK),
            id="link-does-not-follow",
        ),
        pytest.param(
            [f"UPDATE chain SET hash = '{ZERO}' WHERE seq = 4"],
            (4, DefectKind.HASH_MISMATCH),
            id="link-is-not-its-hash",
        ),
        pytest.param(
            ["UPDATE chain SET hash = 'sha256:\u00e9' WHERE seq = 4"],
            (4, DefectKind.HASH_MISMATCH),
            id="link-is-not-ascii",
        ),
        pytest.param(
            ["UPDATE events SET hash = 'sha256:\u00e9' WHERE seq = 4"],
            (4, DefectKind.HASH_MISMATCH),
            id="event-hash-is-not-ascii",
        ),
        pytest.param(
            ["DELETE FROM chain WHERE seq = 3"],
            (4, DefectKind.BROKEN_LINK),
            id="linked-after-an-unlinked-seq",
        ),
        pytest.param(["DELETE FROM events WHERE seq = 3"], (3, DefectKind.GAP), id="gap"),
        pytest.param(
            ["INSERT INTO chain VALUES (0, 'x', 'y')"],
            (None, DefectKind.OUTSIDE_CHAIN),
            id="link-count",
        ),
        pytest.param(
            ["INSERT INTO chain VALUES (9, 'x', 'y')"],
            (9, DefectKind.OUTSIDE_CHAIN),
            id="link-above-the-prefix",
        ),
        pytest.param(
            ["BODY 5"],  # the body of seq 5 changed, its hash left
            (5, DefectKind.HASH_MISMATCH),
            id="body-is-not-its-hash",
        ),
        pytest.param(
            [f"UPDATE chain_checkpoints SET root = '{'0' * 64}' WHERE size = 6"],
            (6, DefectKind.CHECKPOINT),
            id="checkpoint-root",
        ),
        pytest.param(
            ["DELETE FROM events WHERE seq >= 5", "DELETE FROM chain WHERE seq >= 5"],
            (6, DefectKind.CHECKPOINT),
            id="truncated-below-the-checkpoint",
        ),
        pytest.param(
            ["DELETE FROM events WHERE seq >= 5"],
            (6, DefectKind.CHECKPOINT),
            id="events-truncated-below-the-checkpoint",
        ),
    ],
)
def test_an_owners_tamper_is_found(
    pg_url: str, log: Raw, tamper: list[str], expected: tuple[int | None, DefectKind]
) -> None:
    for statement in tamper:
        if statement == "BODY 5":
            body = log.body(5).replace(b'"r2"', b'"rX"')
            log.execute("UPDATE events SET body = ? WHERE seq = 5", (body,))
        else:
            log.execute(statement)
    report = verify(pg_url)
    assert expected in kinds(report), report.defects


@pytest.mark.parametrize(
    ("request_id", "hash_of", "expected"),
    [
        pytest.param("nobody", 7, DefectKind.ORPHAN_OUTCOME, id="orphan"),
        pytest.param("r0", 0, DefectKind.DUPLICATE_OUTCOME, id="duplicate"),
    ],
)
def test_an_outcome_the_app_role_adds_out_of_its_life_is_found(
    pg_url: str,
    postgres_server: PostgresServer,
    log: Raw,
    request_id: str,
    hash_of: int,
    expected: DefectKind,
) -> None:
    """Signed by a trusted record key (a gateway host's), well formed, linked: only the
    lifecycle check can tell."""
    with psycopg.connect(role(postgres_server, pg_url, "tamper_app"), autocommit=True) as conn:
        seq = forge(conn, WRITER, "response", request_id, b'{"ok":true}', request_hash(hash_of))
    integrate(pg_url)
    report = verify(pg_url)
    assert [(d.seq, d.kind) for d in report.defects] == [(seq, expected)]
