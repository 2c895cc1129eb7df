"""Sampling benchmark on the offline n-gram model: tokens/s per decoding strategy, and
speculative decoding's target calls per token, acceptance rate and wall time by draft length k.

    .venv/bin/python bench/sampling_bench.py            # prints two tables
    .venv/bin/python bench/sampling_bench.py --json     # the same figures as JSON

The n-gram target costs about as much per context as its draft, and a batched target call costs
k+1 contexts, so on this model speculative decoding saves target calls but not wall time; the
calls-per-token column is what carries over to a large target whose batched call costs about
one token's latency.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gateway.providers.local import LocalProvider, tokenize
from gateway.sampling import (
    apply_repetition_penalty,
    beam_search,
    contrastive_search,
    greedy,
    sample,
    speculative_generate,
)

PROMPTS = [
    "the reviewer reads the",
    "a payment to a new",
    "the harbour town",
    "sanctions screening",
]
TOKENS = 60


def timed(run: Callable[[list[int]], int], prompts: list[list[int]]) -> float:
    """Tokens per second over all prompts (run returns how many tokens it produced)."""
    start = time.perf_counter()
    produced = sum(run(p) for p in prompts)
    return produced / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args()

    provider = LocalProvider()
    target, draft = provider.model("local:ngram"), provider.model("local:ngram-draft")
    prompts = [target.vocab.ids(tokenize(p)) for p in PROMPTS] * 5

    def sampler(**config: Any) -> Callable[[list[int]], int]:
        def run(prompt: list[int]) -> int:
            rng, context = np.random.default_rng(0), list(prompt)
            for _ in range(TOKENS):
                context.append(sample(target.next_logits([context])[0], rng=rng, **config))
            return TOKENS

        return run

    def greedy_run(prompt: list[int]) -> int:
        context = list(prompt)
        for _ in range(TOKENS):
            context.append(greedy(target.next_logits([context])[0]))
        return TOKENS

    def penalised(prompt: list[int]) -> int:
        rng, context = np.random.default_rng(0), list(prompt)
        for _ in range(TOKENS):
            logits = apply_repetition_penalty(target.next_logits([context])[0], context, 1.3)
            context.append(sample(logits, rng=rng, temperature=0.7))
        return TOKENS

    strategies: dict[str, Callable[[list[int]], int]] = {
        "greedy": greedy_run,
        "sample T=1": sampler(),
        "sample T=0.7 top_p=0.9": sampler(temperature=0.7, top_p=0.9),
        "sample T=1.2 min_p=0.1": sampler(temperature=1.2, min_p=0.1),
        "sample T=0.7 top_k=20": sampler(temperature=0.7, top_k=20),
        "repetition penalty 1.3": penalised,
        "beam width 4": lambda p: len(
            beam_search(target, p, beam_width=4, max_new_tokens=TOKENS).tokens
        ),
        "contrastive k=5 a=0.6": lambda p: len(
            contrastive_search(target, p, top_k=5, alpha=0.6, max_new_tokens=TOKENS)
        ),
    }
    strategy_rows: list[dict[str, Any]] = [
        {"strategy": n, "tokens_per_s": timed(r, prompts)} for n, r in strategies.items()
    ]

    speculative_rows: list[dict[str, Any]] = []
    for k in [0, 1, 2, 3, 4, 6, 8]:
        rng = np.random.default_rng(0)
        generated = target_calls = proposed = accepted = 0
        start = time.perf_counter()
        for prompt in prompts:
            _, stats = speculative_generate(
                target, draft, prompt, k=k, max_new_tokens=TOKENS, rng=rng, temperature=0.7
            )
            generated += stats.generated
            target_calls += stats.target_calls
            proposed += stats.proposed
            accepted += stats.accepted
        wall = time.perf_counter() - start
        speculative_rows.append(
            {
                "k": k,
                "acceptance_rate": accepted / proposed if proposed else None,
                "target_calls_per_token": target_calls / generated,
                "tokens_per_s": generated / wall,
                "ms_per_token": 1000 * wall / generated,
            }
        )
    base = speculative_rows[0]
    for row in speculative_rows:
        row["call_speedup"] = base["target_calls_per_token"] / row["target_calls_per_token"]
        row["wall_speedup"] = base["ms_per_token"] / row["ms_per_token"]

    if args.json:
        print(json.dumps({"strategies": strategy_rows, "speculative": speculative_rows}, indent=2))
        return
    print(f"local:ngram, {len(prompts)} prompts x {TOKENS} tokens, one CPU core")
    print(f"{'strategy':<26}{'tokens/s':>10}")
    for row in strategy_rows:
        print(f"{row['strategy']:<26}{row['tokens_per_s']:>10.0f}")
    print("\nspeculative (draft local:ngram-draft, T=0.7; k=0 is plain target sampling)")
    print(f"{'k':>3}{'accept':>8}{'calls/tok':>11}{'call x':>8}{'tok/s':>8}{'wall x':>8}")
    for row in speculative_rows:
        rate = "-" if row["acceptance_rate"] is None else f"{row['acceptance_rate']:.2f}"
        print(
            f"{row['k']:>3}{rate:>8}{row['target_calls_per_token']:>11.3f}"
            f"{row['call_speedup']:>8.2f}{row['tokens_per_s']:>8.0f}{row['wall_speedup']:>8.2f}"
        )


if __name__ == "__main__":
    main()
