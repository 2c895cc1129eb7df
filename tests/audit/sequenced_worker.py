"""A format-2 writer process: ``python sequenced_worker.py URL NAME THREADS PAIRS KEY``.

Opens its own store (``log_format=2``) with its own record key, as a gateway process does,
and runs THREADS threads that each append PAIRS REQUEST/RESPONSE pairs (each with a payload
named after the pair; ``--payload TEXT`` gives every REQUEST that one payload instead). Prints
each acknowledged seq on its own line (flushed), so a test can check them against the log.
"""

from __future__ import annotations

import sys
import threading

from audit import AuditStore, EventDraft, EventKind
from audit.store.signing import Signer


def main(url: str, name: str, threads: int, pairs: int, key: str, payload: str = "") -> None:
    lock = threading.Lock()

    with AuditStore.open(url, "fsync", signer=Signer.from_text(key), log_format=2) as store:

        def work(t: int) -> None:
            for n in range(pairs):
                rid = f"{name}-{t}-{n}"
                for kind in (EventKind.REQUEST, EventKind.RESPONSE):
                    body = payload.encode() if payload and kind == EventKind.REQUEST else None
                    draft = EventDraft(
                        kind=kind,
                        request_id=rid,
                        request_hash=f"sha256:{abs(hash(rid)):064x}"[:71],
                        data={"n": n, "ok": True},
                        payloads={"body": body or f"{rid} {kind.value}".encode()},
                    )
                    seq = store.append(draft).seq
                    with lock:
                        print(seq, flush=True)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], int(args[2]), int(args[3]), args[4], *args[5:6])
