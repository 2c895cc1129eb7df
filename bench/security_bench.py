"""What record signatures cost: signing per append, checking per read-path hit, verify.

    $ .venv/bin/python bench/security_bench.py                 # 20k-event logs, SQLite os
    $ .venv/bin/python bench/security_bench.py --events 100000

- Ed25519 sign and verify of one event hash (timeit, best of 5 rounds);
- append throughput without and with a signer: single appends from one thread (each its own
  transaction, so the signature sits inside the chain lock once per event) and 1,000-event
  ``append_many`` batches;
- verify of the same log without signature checks (a store with no signer, no keys) and
  with them (``trust=`` the signer's key), so the difference is the signature check;
- the read path's check of one recorded answer (``check_outcome``) with and without the
  :func:`audit.store.signing.signature_check`.

Results print as JSON lines; bench/results/security.md keeps a run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from audit import AuditStore, EventDraft, EventKind  # noqa: E402
from audit.store.signing import Signer, Trust, TrustedKeys, signature_check  # noqa: E402
from audit.verify import verify_log  # noqa: E402
from audit.verify.authenticity import check_outcome  # noqa: E402


def per_call_us(fn: object, number: int) -> float:
    timer = timeit.Timer(fn)  # type: ignore[arg-type]
    return min(timer.repeat(repeat=5, number=number)) / number * 1e6


def draft(n: int) -> EventDraft:
    return EventDraft(
        kind=EventKind.REQUEST if n % 2 == 0 else EventKind.RESPONSE,
        request_id=f"req-{n // 2}",
        task="compliance_review",
        caller="payments-svc",
        request_hash=f"sha256:{n // 2:064x}",
        data={"model": "claude-sonnet-4-6", "ok": True, "n": n},
        payloads={"body": (f"{n:08d}" * 64).encode()},
    )


def appends(url: str, signer: Signer | None, single: int, batched: int) -> dict[str, float]:
    with AuditStore.open(url, "os", signer=signer) as store:
        start = time.perf_counter()
        for n in range(single):
            store.append(draft(n))
        one = time.perf_counter() - start
        start = time.perf_counter()
        for first in range(single, single + batched, 1000):
            store.append_many([draft(n) for n in range(first, first + 1000)])
        many = time.perf_counter() - start
    return {
        "single_us_per_event": round(one / single * 1e6, 1),
        "batched_us_per_event": round(many / batched * 1e6, 1),
    }


def verify_s(url: str, trust: Trust | None) -> float:
    with AuditStore.open(url, "os") as store:
        start = time.perf_counter()
        report = verify_log(store, trust=trust)
        elapsed = time.perf_counter() - start
        assert report.ok, report.defects[:3]
        assert report.signatures_checked is (trust is not None)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    signer = Signer.generate()
    trusted = TrustedKeys.of([signer.public_key])
    event_hash = "sha256:" + "ab" * 32
    signature = signer.sign(event_hash)
    print(json.dumps({"machine": f"{platform.machine()} {os.cpu_count()} cores"}))
    print(
        json.dumps(
            {
                "sign_us": round(per_call_us(lambda: signer.sign(event_hash), 2000), 1),
                "verify_us": round(
                    per_call_us(lambda: trusted.check(signer.key_id, signature, event_hash), 2000),
                    1,
                ),
            }
        )
    )
    single = 2000
    batched = max(1000, (args.events - single) // 1000 * 1000)
    with tempfile.TemporaryDirectory() as folder:
        plain = f"sqlite:///{folder}/plain.db"
        signed = f"sqlite:///{folder}/signed.db"
        print(json.dumps({"appends_unsigned": appends(plain, None, single, batched)}))
        print(json.dumps({"appends_signed": appends(signed, signer, single, batched)}))
        events = single + batched
        unchecked = verify_s(signed, None)
        checked = verify_s(signed, Trust(trusted))
        print(
            json.dumps(
                {
                    "verify_events": events,
                    "verify_unchecked_s": round(unchecked, 2),
                    "verify_signatures_s": round(checked, 2),
                    "verify_events_per_s_unchecked": round(events / unchecked),
                    "verify_events_per_s_signatures": round(events / checked),
                    "signature_us_per_event": round((checked - unchecked) / events * 1e6, 1),
                }
            )
        )
        with AuditStore.open(signed, "os") as store:
            answer = store.find_response(f"sha256:{(single + 2) // 2:064x}")
            assert answer is not None
            check = signature_check(trusted)
            assert not check_outcome(store, answer, signature=check)
            without = per_call_us(lambda: check_outcome(store, answer), 200)
            with_sig = per_call_us(lambda: check_outcome(store, answer, signature=check), 200)
        print(
            json.dumps(
                {
                    "read_path_check_us_without_signatures": round(without, 1),
                    "read_path_check_us_with_signatures": round(with_sig, 1),
                    "read_path_signature_us_per_hit": round(with_sig - without, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
