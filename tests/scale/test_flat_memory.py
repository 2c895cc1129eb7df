"""Reads whose memory does not grow with the log: list, show, export, verify, a replay's
selection. Each runs in a fresh process on a log of 20,000 and of 200,000 events, under
tracemalloc; the peaks must agree within a few MB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audit import AuditStore, EventDraft, EventKind
from audit.store.signing import Signer

ROOT = Path(__file__).resolve().parents[2]
SEED = "42" * 32
MB = 1024 * 1024

# Runs in the child: each operation's tracemalloc peak, in bytes, as one JSON line.
CHILD = """
import gc, io, json, sys, tracemalloc
from audit import AuditStore, EventFilter, export_events, list_requests
from audit.proofs import verified_checkpoint
from audit.store.signing import Signer, Trust, TrustedKeys
from audit.verify import verify_log
from gateway._vocabulary import request_status
from gateway.replay._recorded import Selection, _ids_from_filters

url = sys.argv[1]
signer = Signer.from_text(sys.argv[2])
peaks = {}
with AuditStore.open(url, "os", signer=signer) as store:
    def measure(name, fn):
        # What the previous reads left for the collector is not this read's memory; and the
        # collector stays off, as the CLI runs: memory freed only by a collection would grow.
        gc.collect()
        gc.disable()
        tracemalloc.start()
        fn()
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        gc.enable()

    measure("list", lambda: list_requests(store, EventFilter(), status=request_status, limit=50))
    responses = EventFilter(kind="response")
    measure("list_kind", lambda: list_requests(store, responses, status=request_status, limit=50))
    measure("show", lambda: store.events_for_request("req-7"))
    measure("replay_selection", lambda: _ids_from_filters(store, Selection()))
    measure("export", lambda: export_events(store, io.StringIO(), "jsonl",
                                            EventFilter(task="nothing-matches")))

    class Sink(io.TextIOBase):
        def write(self, text):
            return len(text)

    measure("export_all", lambda: export_events(store, Sink(), "jsonl"))
    trust = Trust(TrustedKeys.of([signer.public_key]))
    # jobs=1: the one-process walk (a log of 200,000 would be walked by workers by default).
    measure("verify", lambda: verify_log(store, trust=trust, jobs=1))
    # A verified checkpoint of the whole log, then a verify that relies on it (tree and
    # signature-column digest folded as it walks): flat too.
    from audit.proofs import checkpoint as checkpoints
    key = bytes(range(32))
    made = []
    measure(
        "verify_measured",
        lambda: made.append(verify_log(store, trust=trust, measure_head=True, jobs=1)),
    )
    cp = verified_checkpoint(store, made[0], key)
    relied = checkpoints.relied_on(cp, trust.keys, {checkpoints.public_key(key)})
    measure("verify_since", lambda: verify_log(store, trust=trust, relied=relied, jobs=1))
    # The range-parallel walk: the parent's memory (each worker holds a page or two).
    measure("verify_parallel", lambda: verify_log(store, trust=trust, jobs=2))
    measure("verify_since_parallel", lambda: verify_log(store, trust=trust, relied=relied, jobs=2))
print(json.dumps(peaks))
"""


def _log(path: Path, events: int) -> str:
    url = f"sqlite:///{path}"
    with AuditStore.open(url, "os", signer=Signer.from_text(SEED)) as store:
        for first in range(0, events, 2000):
            store.append_many(
                [
                    EventDraft(
                        kind=EventKind.REQUEST if n % 2 == 0 else EventKind.RESPONSE,
                        request_id=f"req-{n // 2}",
                        task="compliance_review",
                        caller="payments-svc",
                        request_hash=f"sha256:{n // 2:064x}",
                        data={"model": "claude-sonnet-4-6", "n": n},
                    )
                    for n in range(first, min(first + 2000, events))
                ]
            )
    return url


def _peaks(url: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, SEED],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    peaks: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return peaks


@pytest.mark.slow
@pytest.mark.timeout(900)  # two logs and a dozen reads under tracemalloc, on a shared machine
def test_reads_use_the_same_memory_on_a_log_ten_times_larger(tmp_path: Path) -> None:
    small = _peaks(_log(tmp_path / "small.db", 20_000))
    large = _peaks(_log(tmp_path / "large.db", 200_000))
    # The one-process walk reads the next page while it checks one, so it holds one or two
    # pages of rows: two from the start when checking is slower than reading (signatures),
    # and only sometimes, more often on a long log, when it is faster (since a verified
    # checkpoint). Either way no more than the full walk's two pages.
    # Whether a walk held one page or two is timing, so each one-process walk is held to the
    # most any of them held on the small log (and the relying walk to the large log's full walk).
    two_pages = max(small[name] for name in ("verify", "verify_measured", "verify_since"))
    allowed = {
        "verify": two_pages,
        "verify_measured": two_pages,
        "verify_since": max(two_pages, large["verify"]),
    }
    grown = {name: (large[name] - allowed.get(name, small[name])) / MB for name in small}
    assert all(growth < 3 for growth in grown.values()), {
        name: f"{small[name] / MB:.1f} -> {large[name] / MB:.1f} MB" for name in small
    }
