"""Verify reads the policy keys whole while the table is small, and looks each wanted digest up
once it is not: either way the same rows are found, so the same defects are reported."""

from __future__ import annotations

import pytest

from audit import AuditStore, DefectKind
from audit.canonical import canonical_digest, digest
from audit.verify import verify_log
from tests.audit.conftest import POLICY, Raw, fill

# More policy rows than a page of the six-event log references (its payloads and a policy):
# the walk looks each digest up instead of reading the keys whole.
MANY = 40


def _more_policies(raw: Raw, count: int) -> None:
    for n in range(count):
        content = b'{"task":"other-%d"}' % n
        raw.execute(
            "INSERT INTO policies (fingerprint, content) VALUES (?, ?)", (digest(content), content)
        )


def _payload_ref(raw: Raw, seq: int, name: str) -> str:
    return raw.body(seq).decode().split(f'"{name}":"')[1].split('"')[0]


@pytest.mark.parametrize("extra", [0, MANY], ids=["keys-read-whole", "looked-up"])
def test_a_rewritten_policy_is_found(store: AuditStore, raw: Raw, extra: int) -> None:
    fill(store)
    _more_policies(raw, extra)
    assert verify_log(store).ok
    raw.unguard()
    raw.execute(
        "UPDATE policies SET content = ? WHERE fingerprint = ?", (b"{}", canonical_digest(POLICY))
    )
    report = verify_log(store)
    assert report.first_bad_seq == 1
    assert DefectKind.CONTENT_MISMATCH in {d.kind for d in report.defects if d.seq == 1}


@pytest.mark.parametrize("extra", [0, MANY], ids=["keys-read-whole", "looked-up"])
def test_a_policy_row_planted_under_a_payloads_digest_wins(
    store: AuditStore, raw: Raw, extra: int
) -> None:
    """A policy row is read over a payload row of the same digest: content planted there is
    what the payload's digest is checked against."""
    fill(store)
    _more_policies(raw, extra)
    ref = _payload_ref(raw, 4, "response_body")
    raw.unguard()
    raw.execute("INSERT INTO policies (fingerprint, content) VALUES (?, ?)", (ref, b"planted"))
    report = verify_log(store)
    assert report.first_bad_seq == 4
    mismatch = [d for d in report.defects if d.kind == DefectKind.CONTENT_MISMATCH]
    assert [d.seq for d in mismatch] == [4]


def test_a_policy_key_sqlite_cannot_read_as_text_is_looked_past(tmp_path: object) -> None:
    """A hand-edited key that is not UTF-8 cannot be read whole: the digests are looked up as
    they always were, and the row, which no event names, changes nothing."""
    url = f"sqlite:///{tmp_path}/audit.db"
    with AuditStore.open(url) as store:
        fill(store)
        raw = Raw(url)
        try:
            raw.execute(
                "INSERT INTO policies (fingerprint, content) VALUES (CAST(x'ff' AS TEXT), x'00')"
            )
        finally:
            raw.close()
        assert verify_log(store).ok
