"""A separate process that appends to an audit store: ``python append_worker.py URL NAME N``.

Prints each acknowledged seq on its own line (flushed), so a test that kills this process can
check that every acknowledged record survived.
"""

from __future__ import annotations

import sys

from audit import AuditStore, EventDraft, EventKind


def main(url: str, name: str, count: int, durability: str = "fsync") -> None:
    with AuditStore.open(url, durability) as store:
        for n in range(count):
            rid = f"{name}-{n}"
            seq = store.append(EventDraft(kind=EventKind.REQUEST, request_id=rid, data={"n": n}))
            print(seq.seq, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
