"""What keyed digests add to a request's write path: sealing each payload (a mark and a salt
before the bytes, then sha256 of the row) against the plain sha256 of the bytes, and the
HMAC of the request hash, per request body size. In-process, rounds interleaved, the
fastest round of each reported (the machine is shared).

    $ .venv/bin/python bench/keyed_digest_bench.py
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from audit.canonical import digest  # noqa: E402
from audit.sealing import seal  # noqa: E402
from gateway.keys import CacheKey, keyed_request_hash  # noqa: E402

ROUNDS, LOOPS = 15, 2000


def per_call(fn: object, loops: int = LOOPS) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        fn()  # type: ignore[operator]
    return (time.perf_counter() - start) / loops * 1e6


def main() -> None:
    key = CacheKey(secrets.token_bytes(32))
    plain_hash = digest(b"request")
    salt = secrets.token_bytes(16)
    print(f"load: {os.getloadavg()}")
    for size in (300, 2_000, 30_000, 1_000_000):
        body = b"x" * size
        plain, sealed, hmac_us = [], [], []
        for _ in range(ROUNDS):
            plain.append(per_call(lambda b=body: digest(b)))
            sealed.append(per_call(lambda b=body: digest(seal(b, salt))))
            hmac_us.append(per_call(lambda: keyed_request_hash(key, plain_hash)))
        p, s, h = (min(x) for x in (plain, sealed, hmac_us))  # min: the least disturbed round
        print(
            f"{size:>9} B: plain sha256 {p:8.2f} us, sealed {s:8.2f} us "
            f"(x{s / p:.2f}, +{s - p:.2f} us); request-hash HMAC {h:.2f} us"
        )


if __name__ == "__main__":
    main()
