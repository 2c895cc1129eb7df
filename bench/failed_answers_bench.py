"""What a replay lookup costs when a request hash has many failed answers on the record.

    $ .venv/bin/python bench/failed_answers_bench.py                  # 20,000 failed answers
    $ .venv/bin/python bench/failed_answers_bench.py --failed 2000 --trials 5

A reproducible request whose every answer failed its output check piles up RESPONSE events
with ``ok = false`` under one request hash; each new identical request asks the log for a
servable answer before it goes upstream. The log is built the way the gateway writes it: one
real request through a gateway (offline model, SQLite), then its REQUEST and RESPONSE appended
``--failed`` times by the store's own append path, signed by the same record key, each
RESPONSE marked as failing its output check. Each trial copies that database, opens a new
gateway (an empty memo) and times one ``complete`` of the same request: the lookup, the
offline call and the recording. The same is timed on a log with no failed answers.

Results print as JSON lines; bench/results/replay.md keeps a run.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from audit import AuditStore, EventDraft, EventKind  # noqa: E402
from audit.store.signing import Signer  # noqa: E402
from gateway import Gateway, Settings  # noqa: E402

TASK = "compliance_review"
QUESTION = "Transaction: EUR 9,500 cash deposit, third this week, customer account 4471."
KEY = "c3" * 32


def settings(db: Path, policies: Path) -> Settings:
    return Settings(
        policy_dir=policies,
        database_url=f"sqlite:///{db}",
        durability="os",
        default_caller="desk",
        record_key=KEY,
    )


def build(db: Path, policies: Path, failed: int) -> None:
    """One real life, then ``failed`` copies of it whose RESPONSE failed its output check;
    the real life's own answer is dropped by starting over in ``db`` from its drafts."""
    scratch = db.with_name("scratch.db")
    with Gateway(settings(scratch, policies), offline=True) as gw:
        gw.complete(TASK, QUESTION, caller="desk")
    with AuditStore.open(f"sqlite:///{scratch}", "os", create=False) as store:
        request, response = store.iter_events()
        policy = store.policy_content(request.policy_fingerprint or "")
        payloads = {
            e.kind: {name: store.payload(ref) for name, ref in e.payload_digests.items()}
            for e in (request, response)
        }
    drafts = []
    for n in range(failed):
        for event in (request, response):
            data = dict(event.data)
            if event.kind == EventKind.RESPONSE:
                data["ok"] = False
                data["output_check"] = {"ok": False, "error": "not the requested format"}
            drafts.append(
                EventDraft(
                    kind=event.kind,
                    request_id=f"req_failed_{n}",
                    task=event.task,
                    caller=event.caller,
                    policy_fingerprint=event.policy_fingerprint,
                    request_hash=event.request_hash,
                    data=data,
                    payloads=payloads[event.kind],
                    policy_content=policy if event.kind == EventKind.REQUEST else None,
                )
            )
    with AuditStore.open(f"sqlite:///{db}", "os", signer=Signer.from_text(KEY)) as store:
        for start in range(0, len(drafts), 2000):
            store.append_many(drafts[start : start + 2000])


def time_lookups(template: Path, policies: Path, trials: int) -> list[float]:
    """Seconds of one ``complete`` on a fresh copy of ``template`` with a fresh gateway."""
    times = []
    for n in range(trials):
        db = template.with_name(f"trial-{n}.db")
        shutil.copyfile(template, db)
        with Gateway(settings(db, policies), offline=True) as gw:
            started = time.perf_counter()
            result = gw.complete(TASK, QUESTION, caller="desk")
            times.append(time.perf_counter() - started)
            assert not result.cached
        db.unlink()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--failed", type=int, default=20_000)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        policies = folder / "policies"
        shutil.copytree(ROOT / "policies", policies)
        for failed in (0, args.failed):
            template = folder / f"failed-{failed}.db"
            (folder / "scratch.db").unlink(missing_ok=True)
            started = time.perf_counter()
            build(template, policies, failed)
            built = time.perf_counter() - started
            times = time_lookups(template, policies, args.trials)
            print(
                json.dumps(
                    {
                        "failed_answers": failed,
                        "build_s": round(built, 1),
                        "complete_s": [round(t, 3) for t in times],
                        "python": platform.python_version(),
                    }
                )
            )


if __name__ == "__main__":
    main()
