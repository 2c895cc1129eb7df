"""What the gateway adds to a framework-sized request: a caller system prompt and 20 caller tools
(about 30 KB of body), against today's plain request, in one run (issue 23, "Speed").

    $ .venv/bin/python bench/clients_bench.py                  # about two minutes
    $ .venv/bin/python bench/clients_bench.py --calls 600
    $ .venv/bin/python bench/clients_bench.py --baseline /tmp/base   # another tree, same run

In one run, on the loopback fake (its own process), one `gateway serve` worker and a fresh
SQLite file (durability os), with the official Python SDK as the client, c=1, four kinds
interleaved call by call (each round in a shuffled order, so a change of load hits all alike):

- ``plain direct`` / ``plain served``: the plain request of bench/server_bench.py
  (``quant_strategy``, one user message, the policy's own prompt) to the fake and through
  `gateway serve`;
- ``caller parts direct`` / ``caller parts served``: the same user message with the caller's
  own system prompt and 20 tools (``general_assistant``, which opens both; record mode, so
  every call goes upstream) to the fake and through `gateway serve`.

With ``--baseline TREE`` (a checkout of another commit, e.g. ``git archive main | tar -x -C
/tmp/base``) a second `gateway serve` runs that tree's code on its own database, and its two
served kinds join the same interleaved rounds: a before/after comparison under one load.

The figure is each served kind's added p50 over its own direct kind, and the ratio of the two
(issue 23's target: at most 1.2); plus the server process's CPU time per call of each kind
(load-independent; measured in separate blocks, one kind at a time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402

from bench.gateway_bench import fake_api  # noqa: E402
from bench.server_bench import (  # noqa: E402
    SERVER_PIDS,
    cpu_seconds,
    gateway_server,
    pct,
    thread_cpu_ns,
    timed,
)

PLAIN_TASK = "quant_strategy"
PLAIN_MODEL = "claude-opus-4-6"
OPEN_TASK = "general_assistant"
OPEN_MODEL = "claude-sonnet-4-6"
QUESTION = [{"role": "user", "content": "Momentum on FX majors"}]


def caller_tools(count: int = 20) -> list[dict[str, Any]]:
    """``count`` tools shaped like a framework's (a paragraph of description, typed and
    described parameters), about 1.4 KB each."""
    tools = []
    for n in range(count):
        properties = {
            f"field_{k}": {
                "type": "string" if k % 2 else "integer",
                "description": f"Parameter {k} of tool {n}: which record, range or filter the "
                "application's handler applies before it answers the model.",
            }
            for k in range(5)
        }
        tools.append(
            {
                "name": f"desk_tool_{n:02d}",
                "description": (
                    f"Tool {n} of the desk application. Looks up positions, limits and client "
                    "records in the bank's own systems and returns a JSON summary. Use it when "
                    "the user asks about a record the conversation does not already hold; never "
                    "guess identifiers. " * 2
                ),
                "input_schema": {
                    "type": "object",
                    "properties": properties,
                    "required": ["field_0"],
                },
            }
        )
    return tools


SYSTEM = (
    "You are the desk assistant of a trading floor. Answer briefly, cite the tool results you "
    "used, and say when a question is outside the desk's remit. " * 12
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300, help="timed calls per kind at c=1")
    parser.add_argument("--cpu-calls", type=int, default=200, help="calls per CPU block")
    parser.add_argument("--baseline", type=Path, help="another source tree, served beside")
    args = parser.parse_args()

    tools = caller_tools()
    big = {"max_tokens": 1024, "messages": QUESTION, "system": SYSTEM, "tools": tools}
    plain = {"max_tokens": 256, "messages": QUESTION}
    big_bytes = len(json.dumps({"model": OPEN_TASK, **big}).encode())

    home = Path(tempfile.mkdtemp(prefix="clients-bench-"))
    shutil.copytree(ROOT / "policies", home / "policies")
    with fake_api(in_process=False) as fake_url:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "ANTHROPIC_"))}
        env.update(
            {
                "GATEWAY_POLICY_DIR": str(home / "policies"),
                "GATEWAY_DATABASE_URL": f"sqlite:///{home / 'audit.db'}",
                "GATEWAY_DURABILITY": "os",
                "ANTHROPIC_API_KEY": "sk-bench",
                "ANTHROPIC_BASE_URL": fake_url,
                "PYTHONPATH": str(ROOT),
            }
        )
        trees = {"": (ROOT, env)}
        if args.baseline is not None:
            base_db = f"sqlite:///{home / 'baseline.db'}"
            trees[" (baseline)"] = (args.baseline, {**env, "GATEWAY_DATABASE_URL": base_db})
        direct = anthropic.Anthropic(base_url=fake_url, api_key="sk-bench", max_retries=0)
        kinds: dict[str, Callable[[], Any]] = {
            "plain direct": lambda: direct.messages.create(model=PLAIN_MODEL, **plain),
            "caller parts direct": lambda: direct.messages.create(model=OPEN_MODEL, **big),
        }
        servers: dict[str, str] = {}
        with contextlib.ExitStack() as stack:
            for label, (tree, tree_env) in trees.items():
                key = caller_key(tree, tree_env)
                url = stack.enter_context(gateway_server(tree_env, 1, tree))
                servers[label] = url
                served = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
                kinds[f"plain served{label}"] = partial(
                    served.messages.create, model=PLAIN_TASK, **plain
                )
                kinds[f"caller parts served{label}"] = partial(
                    served.messages.create, model=OPEN_TASK, **big
                )
            report(args, kinds, servers, big_bytes)
    shutil.rmtree(home, ignore_errors=True)


def caller_key(tree: Path, env: dict[str, str]) -> str:
    """A caller key issued by ``tree``'s own code, so its database is made (and migrated) by
    the tree whose server will open it: a baseline without a newer migration would refuse a
    database this tree made, and its server would never answer."""
    create = ["keys", "create", "--caller", "bench", "--format", "json"]
    made = subprocess.run(
        [sys.executable, "-m", "gateway", *create],
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    key: str = json.loads(made.stdout)["key"]
    return key


def report(
    args: argparse.Namespace,
    kinds: dict[str, Callable[[], Any]],
    servers: dict[str, str],
    size: int,
) -> None:
    for call in kinds.values():  # warm-up: connections, the SDK's first-call costs
        for _ in range(30):
            call()
    ms: dict[str, list[float]] = {name: [] for name in kinds}
    # Each served call's server CPU: what the server spent from the call's start to the start
    # of its next call (the server is otherwise idle at c=1, and so whatever it finishes
    # after answering counts too). Interleaved like the wall-clock figures, so a change of
    # load hits all alike.
    pids = {
        kind + label: SERVER_PIDS[url]
        for label, url in servers.items()
        for kind in ("plain served", "caller parts served")
    }
    call_cpu: dict[str, list[int]] = {name: [] for name in pids}
    last: dict[int, tuple[str, int]] = {}  # server -> (its last call's kind, CPU at its start)
    order = list(kinds.items())
    shuffler = random.Random(23)
    for _ in range(args.calls):
        shuffler.shuffle(order)
        for name, call in order:
            pid = pids.get(name)
            if pid is not None:
                now = thread_cpu_ns(pid)
                if pid in last:
                    call_cpu[last[pid][0]].append(now - last[pid][1])
                last[pid] = (name, now)
            ms[name].append(timed(call))
    cpu: dict[str, float] = {}
    for label, url in servers.items():
        pid = SERVER_PIDS[url]
        for kind in ("plain served", "caller parts served"):
            name = kind + label
            before = cpu_seconds(pid)
            for _ in range(args.cpu_calls):
                kinds[name]()
            cpu[name] = (cpu_seconds(pid) - before) * 1000 / args.cpu_calls

    p50 = {name: statistics.median(values) for name, values in ms.items()}
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, anthropic {anthropic.__version__}, "
        f"load {os.getloadavg()[0]:.1f}; caller-parts body {size:,} bytes"
    )
    print("\n| c=1 (interleaved) | calls | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    for name, values in ms.items():
        print(f"| {name} | {len(values)} | {p50[name]:.2f} | {pct(values, 0.99):.2f} |")
    for label in servers:
        added_plain = p50[f"plain served{label}"] - p50["plain direct"]
        added_big = p50[f"caller parts served{label}"] - p50["caller parts direct"]
        interleaved = {
            kind: statistics.fmean(call_cpu[kind + label]) / 1e6
            for kind in ("plain served", "caller parts served")
        }
        print(
            f"\n{label.strip() or 'this tree'}: added p50 plain +{added_plain:.2f} ms, "
            f"caller parts +{added_big:.2f} ms, ratio {added_big / added_plain:.2f} "
            f"(target <= 1.2); server CPU per call: plain {cpu[f'plain served{label}']:.2f} ms, "
            f"caller parts {cpu[f'caller parts served{label}']:.2f} ms (blocks); "
            f"plain {interleaved['plain served']:.2f} ms, caller parts "
            f"{interleaved['caller parts served']:.2f} ms, extra "
            f"{interleaved['caller parts served'] - interleaved['plain served']:.2f} ms "
            "(interleaved, per call)"
        )


if __name__ == "__main__":
    main()
