"""Added latency of a Bedrock-routed and a Vertex-routed request, against the first-party one.

    $ .venv/bin/python bench/cloud_bench.py                  # 300 calls per side, 5 rounds
    $ .venv/bin/python bench/cloud_bench.py --calls 600 --rounds 7 --json out.json

For each transport (``anthropic``, ``bedrock``, ``vertex``), in the same run against the same
loopback fake (tests/fakes: the Messages API fake, and the Bedrock and Vertex fakes, whose
SigV4 and bearer checks run on every request):

- ``raw``: the SDK's own client for the transport (``Anthropic``, ``AnthropicBedrock``,
  ``AnthropicVertex``) straight at the fake, ``messages.create`` with the body the gateway
  sends (no retries, the same static test credentials);
- ``gateway``: ``Gateway.complete`` on a ``record`` policy naming that transport (every call
  goes upstream and writes REQUEST and RESPONSE, durability ``os``, a fresh SQLite file).

Sync caller, one call at a time; each round runs raw and gateway calls interleaved (one of
each, in turn) so load drift on a shared host hits both alike. The figures are the p50 added
over the raw call (gateway p50 - raw p50) and the calling thread's CPU added per call, per
transport, median over rounds, and the ratio of a cloud's added time to the first-party
transport's (issue 24's target: within 1.2x). The fakes run in a process of their own, so
their request handling does not hold this process's GIL.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402

from gateway import Gateway, Settings  # noqa: E402
from gateway.logging import configure_logging  # noqa: E402
from tests.fakes.cloud_apis import VERSIONS, FakeBedrock, FakeVertex  # noqa: E402
from tests.fakes.cloud_auth import (  # noqa: E402
    BEARER_TOKEN_VARIABLE,
    GOOGLE_TOKEN,
    aws_test_environment,
    vertex_with_token,
)
from tests.fakes.messages_api import FakeMessagesAPI  # noqa: E402

API_KEY = "sk-bench-not-a-secret"
REGION = "eu-central-1"
VERTEX_REGION = "europe-west1"
PROMPT = "Summarise the exposure of counterparty 4711 in one paragraph. " * 4
MAX_TOKENS = 512
TRANSPORTS = ("anthropic", "bedrock", "vertex")
MODEL_LINES = {
    "anthropic": "",
    "bedrock": f'transport = "bedrock"\ntransport_id = "eu.anthropic.claude-sonnet-4-6"\n'
    f'region = "{REGION}"\n',
    "vertex": f'transport = "vertex"\nregion = "{VERTEX_REGION}"\n',
}
POLICY = """schema = 1
description = "Benchmark task: every call goes upstream and is recorded."
owner = "platform-engineering"

[model]
id = "claude-sonnet-4-6"
{model}
[generation]
max_tokens = {max_tokens}

[output]
format = "text"

[cache]
mode = "record"
"""


@contextmanager
def sides(home: Path) -> Iterator[dict[str, tuple[Callable[[], Any], Callable[[], Any]]]]:
    """Per transport: (raw SDK call, gateway call), against one fake each."""
    policies = home / "policies"
    policies.mkdir()
    for name in TRANSPORTS:
        text = POLICY.format(model=MODEL_LINES[name], max_tokens=MAX_TOKENS)
        (policies / f"bench_{name}.toml").write_text(text)
    messages = [{"role": "user", "content": PROMPT}]
    with ExitStack() as stack:
        first, bedrock, vertex = stack.enter_context(fakes_process())
        settings = Settings(
            policy_dir=policies,
            database_url=f"sqlite:///{home / 'audit.db'}",
            durability="os",
            anthropic_api_key=API_KEY,
            anthropic_base_url=first.base_url,
            bedrock_region=REGION,
            bedrock_base_url=bedrock.base_url,
            vertex_project="bank-bench",
            vertex_region=VERTEX_REGION,
            vertex_base_url=f"{vertex.base_url}/v1",
            default_caller="bench",
        )
        gw = stack.enter_context(Gateway(settings, providers={"vertex": vertex_with_token()}))
        raw_first = anthropic.Anthropic(api_key=API_KEY, base_url=first.base_url, max_retries=0)
        raw_bedrock = anthropic.AnthropicBedrock(
            aws_region=REGION, base_url=bedrock.base_url, max_retries=0
        )
        raw_vertex = anthropic.AnthropicVertex(
            region=VERTEX_REGION,
            project_id="bank-bench",
            access_token=GOOGLE_TOKEN,
            base_url=f"{vertex.base_url}/v1",
            max_retries=0,
        )
        model = {"anthropic": "claude-sonnet-4-6", "bedrock": "eu.anthropic.claude-sonnet-4-6"}
        raws: dict[str, Callable[[], Any]] = {
            "anthropic": lambda: raw_first.messages.create(
                model=model["anthropic"], max_tokens=MAX_TOKENS, messages=messages
            ),
            "bedrock": lambda: raw_bedrock.messages.create(
                model=model["bedrock"],
                max_tokens=MAX_TOKENS,
                messages=messages,
                extra_body={"anthropic_version": VERSIONS["bedrock"]},
            ),
            "vertex": lambda: raw_vertex.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=MAX_TOKENS,
                messages=messages,
                extra_body={"anthropic_version": VERSIONS["vertex"]},
            ),
        }
        yield {
            name: (raws[name], lambda name=name: gw.complete(f"bench_{name}", PROMPT))
            for name in TRANSPORTS
        }
        for client in (raw_first, raw_bedrock, raw_vertex):
            client.close()


class _Fake:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


@contextmanager
def fakes_process() -> Iterator[tuple[_Fake, _Fake, _Fake]]:
    """The three fakes in a child process (``--fakes-only``), until this context ends."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--fakes-only"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        urls = json.loads(child.stdout.readline())
        yield _Fake(urls["anthropic"]), _Fake(urls["bedrock"]), _Fake(urls["vertex"])
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def serve_fakes() -> None:
    """Run the fakes, print their base URLs as one JSON line, serve until stdin closes."""
    with ExitStack() as stack:
        first = stack.enter_context(FakeMessagesAPI())
        bedrock = stack.enter_context(FakeBedrock(region=REGION))
        vertex = stack.enter_context(FakeVertex(token=GOOGLE_TOKEN))
        urls = {"anthropic": first.base_url, "bedrock": bedrock.base_url}
        print(json.dumps({**urls, "vertex": vertex.base_url}), flush=True)
        sys.stdin.read()


def timed(call: Callable[[], Any]) -> tuple[float, float]:
    """Wall and calling-thread CPU time of one call, in ms."""
    start, cpu = time.perf_counter(), time.thread_time()
    call()
    return (time.perf_counter() - start) * 1000.0, (time.thread_time() - cpu) * 1000.0


def run(calls: int, rounds: int, warmup: int) -> dict[str, Any]:
    configure_logging(level="WARNING")
    per_round: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ.update(aws_test_environment(home))
        os.environ.pop(BEARER_TOKEN_VARIABLE, None)
        with sides(home) as pairs:
            for raw, gateway in pairs.values():
                for _ in range(warmup):
                    raw(), gateway()
            for index in range(rounds):
                figures: dict[str, dict[str, float]] = {}
                # Rotate the transports' order each round: none always runs first.
                order = TRANSPORTS[index % 3 :] + TRANSPORTS[: index % 3]
                for name in order:
                    raw, gateway = pairs[name]
                    raw_ms: list[tuple[float, float]] = []
                    gw_ms: list[tuple[float, float]] = []
                    for _ in range(calls):
                        raw_ms.append(timed(raw))
                        gw_ms.append(timed(gateway))
                    raw_p50 = statistics.median(wall for wall, _ in raw_ms)
                    gw_p50 = statistics.median(wall for wall, _ in gw_ms)
                    raw_cpu = statistics.mean(cpu for _, cpu in raw_ms)
                    gw_cpu = statistics.mean(cpu for _, cpu in gw_ms)
                    figures[name] = {
                        "raw_p50": raw_p50,
                        "gw_p50": gw_p50,
                        "added": gw_p50 - raw_p50,
                        "raw_cpu": raw_cpu,
                        "added_cpu": gw_cpu - raw_cpu,
                    }
                per_round.append(figures)
                added = {n: round(figures[n]["added"], 3) for n in TRANSPORTS}
                print(f"round {index + 1}: added p50 ms {added}", flush=True)
    summary: dict[str, Any] = {}
    for name in TRANSPORTS:
        summary[name] = {
            key: statistics.median(r[name][key] for r in per_round)
            for key in ("raw_p50", "gw_p50", "added", "raw_cpu", "added_cpu")
        }
    for name in ("bedrock", "vertex"):
        for key in ("added", "added_cpu"):
            ratios = [r[name][key] / r["anthropic"][key] for r in per_round]
            summary[name][f"{key}_ratio"] = statistics.median(ratios)
            summary[name][f"{key}_ratio_range"] = (min(ratios), max(ratios))
    return {"calls": calls, "rounds": rounds, "per_round": per_round, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--fakes-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fakes_only:
        serve_fakes()
        return
    result = run(args.calls, args.rounds, args.warmup)
    print(
        f"{'transport':10} {'raw p50':>8} {'gw p50':>8} {'added':>7} {'x 1st-party':>17} "
        f"{'cpu added':>9} {'x 1st-party':>17}"
    )
    for name, row in result["summary"].items():
        print(
            f"{name:10} {row['raw_p50']:8.2f} {row['gw_p50']:8.2f} {row['added']:7.2f} "
            f"{_ratio(row, 'added'):>17} {row['added_cpu']:9.2f} {_ratio(row, 'added_cpu'):>17}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


def _ratio(row: dict[str, Any], key: str) -> str:
    if f"{key}_ratio" not in row:
        return "1.00"
    low, high = row[f"{key}_ratio_range"]
    return f"{row[f'{key}_ratio']:.2f} ({low:.2f}-{high:.2f})"


if __name__ == "__main__":
    main()
