"""Verify's walk with its record signatures checked by the signature pool: the page goes
through the same short path as an inline walk (``Verifier.feed_page`` with the pool's
verdicts), and says exactly what the inline walk says, defects and counts alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.store.models import DefectKind
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify._read import ChainReader
from audit.verify._signature_pool import SignaturePool
from audit.verify._verifier import Verifier
from audit.verify.body import newest_refs, parse_page, referenced

pytestmark = pytest.mark.slow  # worker processes


def _tampered(path: Path) -> str:
    """40 events, each with a payload: seq 1 and 2 unsigned (allowed below 4), seq 5's
    signature removed, seq 9's altered, seq 12 signed by an untrusted key, seq 20's payload
    rewritten, seq 30's hash column rewritten."""
    url = f"sqlite:///{path}"
    ours, theirs = Signer.from_text("11" * 32), Signer.from_text("22" * 32)

    def draft(n: int) -> EventDraft:
        return EventDraft(
            kind=EventKind.REQUEST if n % 2 else EventKind.RESPONSE,
            request_id=f"r{(n + 1) // 2}",
            payloads={"request_body": f"body {n}".encode()},
        )

    with AuditStore.open(url, "os") as store:
        store.append_many([draft(n) for n in (1, 2)])
    for first, last, signer in ((3, 11, ours), (12, 12, theirs), (13, 40, ours)):
        with AuditStore.open(url, "os", signer=signer) as store:
            store.append_many([draft(n) for n in range(first, last + 1)])
    with sqlite3.connect(path) as raw:
        for (name,) in list(raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'")):
            raw.execute(f"DROP TRIGGER {name}")
        raw.execute("UPDATE events SET signature = NULL, key_id = NULL WHERE seq = 5")
        raw.execute("UPDATE events SET signature = substr(signature, 2) || 'A' WHERE seq = 9")
        raw.execute("UPDATE events SET hash = 'sha256:' || printf('%064d', 7) WHERE seq = 30")
        (body,) = raw.execute("SELECT body FROM events WHERE seq = 20").fetchone()
        digest = body.split(b'"request_body":"')[1][:71].decode()
        raw.execute("UPDATE payloads SET content = x'00' WHERE digest = ?", (digest,))
    return url


def _walk(url: str, trust: Trust, pooled: bool) -> tuple[object, int]:
    with AuditStore.open(url, "os") as store:
        reader = ChainReader(store.backend, upto=40, page=16)
        verifier = Verifier(None, trust, same_time=reader.same_time)
        pool = SignaturePool(trust, workers=2) if pooled else None
        try:
            for page in reader.pages():
                parsed = parse_page([row.body for row in page])
                contents = reader.content_digests(referenced(parsed), newest_refs(parsed))
                verdicts = pool.submit(page).result() if pool is not None else None
                verifier.feed_page(page, parsed, contents, verdicts)
                verifier.settle({}, [])
        finally:
            if pool is not None:
                pool.close()
        report = verifier.report()
        return report, verifier.unsigned_allowed


def test_the_pools_verdicts_give_the_inline_walks_report(tmp_path: Path) -> None:
    url = _tampered(tmp_path / "log.db")
    trust = Trust(TrustedKeys.of([Signer.from_text("11" * 32).public_key]), 4)
    inline, inline_allowed = _walk(url, trust, pooled=False)
    pooled, pooled_allowed = _walk(url, trust, pooled=True)
    assert pooled == inline
    assert pooled_allowed == inline_allowed == 2
    found = {(d.seq, d.kind) for d in inline.defects}  # type: ignore[attr-defined]
    assert {
        (5, DefectKind.UNSIGNED),
        (9, DefectKind.BAD_SIGNATURE),
        (12, DefectKind.UNTRUSTED_SIGNER),
        (20, DefectKind.CONTENT_MISMATCH),
        (30, DefectKind.HASH_MISMATCH),
    } <= found
