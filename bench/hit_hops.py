"""Hops of a replay hit: the project functions on the call path from ``Gateway.complete``
(or ``AsyncGateway.complete``) down to the audit store's read of the recorded answer.

    $ .venv/bin/python bench/hit_hops.py            # prints the path and its length
    $ git archive BASE | tar -x -C /tmp/base && cp bench/hit_hops.py /tmp/base/bench/
    $ (cd /tmp/base && $OLDPWD/.venv/bin/python bench/hit_hops.py)   # the same, for BASE

A first gateway records the answer (a ``replay`` policy on the loopback fake); a second one,
on the same database with an empty memo, serves it, under ``sys.setprofile``. At the first
call into ``audit.store`` that reads RESPONSE events (the lookup), the stack is walked back to
the gateway's entry point; each frame of project code (``gateway/``, ``audit/``) is one hop.
For AsyncGateway the read runs in a worker thread, so its figure is that thread's stack (from
the worker's loop down). Also listed: every function of a top-level ``gateway/`` module that
the hit enters, and those entered once the request is keyed (stage 4 on: the serving part).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import audit  # noqa: E402
import gateway  # noqa: E402
from gateway import AsyncGateway, Gateway  # noqa: E402
from tests.fakes.messages_api import FakeMessagesAPI, Reply  # noqa: E402

PROJECT = (str(Path(gateway.__file__).parent), str(Path(audit.__file__).parent))
READS = {"find_response", "responses"}
ENTRY = {"complete"}


def project(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(PROJECT)


def label(frame: FrameType) -> str:
    code = frame.f_code
    rel = Path(code.co_filename).relative_to(Path(PROJECT[0]).parent)
    return f"{rel}:{code.co_qualname}"


def path_to(frame: FrameType) -> list[str]:
    out: list[str] = []
    f: FrameType | None = frame
    while f is not None:
        if project(f):
            out.append(label(f))
            if f.f_code.co_name in ENTRY and f.f_code.co_filename.endswith("client.py"):
                break
        f = f.f_back
    return list(reversed(out))


def top_level(frame: FrameType) -> bool:
    """A module of the request path (directly in gateway/ before it had a room, or in
    gateway/request/), not policy/, providers/, ..."""
    folder = str(Path(frame.f_code.co_filename).parent)
    return folder in (PROJECT[0], str(Path(PROJECT[0]) / "request"))


def main() -> None:
    seen: list[list[str]] = []
    entered: dict[str, None] = {}

    def profiler(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and top_level(frame):
            entered.setdefault(label(frame))
        if (
            event == "call"
            and frame.f_code.co_name in READS
            and frame.f_code.co_filename.endswith(
                ("audit/store.py", "audit/_store_read.py", "audit/store/_store.py")
            )
            and not seen
        ):
            seen.append(path_to(frame))

    with tempfile.TemporaryDirectory() as work, FakeMessagesAPI() as fake:
        fake.set_default(lambda _request: Reply.ok(text="recorded answer"))
        policies = ROOT / "policies"
        kwargs: dict[str, Any] = {
            "policy_dir": policies,
            "database_url": f"sqlite:///{work}/hops.db",
            "anthropic_api_key": "sk-test",
            "base_url": fake.base_url,
        }
        with Gateway(**kwargs) as gw:
            gw.complete("compliance_review", "Transaction: hops", caller="hops")
        with Gateway(**kwargs) as gw:
            sys.setprofile(profiler)
            result = gw.complete("compliance_review", "Transaction: hops", caller="hops")
            sys.setprofile(None)
        assert result.cached
        sync_path = seen.pop()
        sync_entered = list(entered)
        entered.clear()

        async def run() -> bool:
            async with AsyncGateway(**kwargs) as agw:
                threading.setprofile(profiler)
                sys.setprofile(profiler)
                r = await agw.complete("compliance_review", "Transaction: hops", caller="hops")
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]
                return r.cached

        assert asyncio.run(run())
        async_path = seen.pop() if seen else []

    async_entered = list(entered)
    for name, hops in (
        ("Gateway.complete", sync_path),
        ("AsyncGateway.complete (worker)", async_path),
    ):
        print(f"{name}: {len(hops)} project frames to the store read")
        for i, hop in enumerate(hops, 1):
            print(f"  {i:2d} {hop}")
    for name, functions in (("Gateway", sync_entered), ("AsyncGateway", async_entered)):
        files = sorted({f.split(":")[0] for f in functions})
        keyed = next(i for i, f in enumerate(functions) if f.endswith(":request_hash_for"))
        serving = functions[keyed + 1 :]
        serving_files = sorted({f.split(":")[0] for f in serving})
        print(
            f"{name}: a hit enters {len(functions)} functions of gateway/*.py in {len(files)} "
            f"files; {len(serving)} in {len(serving_files)} files once keyed (stage 4 on)"
        )
        for i, function in enumerate(functions, 1):
            print(f"  {i:2d} {function}")


if __name__ == "__main__":
    main()
