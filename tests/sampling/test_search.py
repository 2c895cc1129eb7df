"""Beam search finds the known best sequence; contrastive search avoids degenerate loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gateway.sampling import beam_search, contrastive_search, greedy
from tests.sampling.toy_models import BigramModel, random_bigram

# Token 0 is the start. From it, 1 (p=0.6) looks best but is followed by a flat distribution;
# 2 (p=0.4) is followed by 3 with p=0.9. Best pair: (2, 3) with 0.36 against (1, x) with 0.2.
TRAP = BigramModel(
    np.log(
        [
            [1e-9, 0.6, 0.4, 1e-9],
            [1e-9, 0.34, 0.33, 0.33],
            [0.05, 0.025, 0.025, 0.9],
            [0.25, 0.25, 0.25, 0.25],
        ]
    )
)


def log_prob(model: BigramModel, prompt: list[int], tokens: tuple[int, ...]) -> float:
    total, context = 0.0, list(prompt)
    for t in tokens:
        row = model.next_logits([context])[0]
        total += float(row[t] - np.log(np.exp(row).sum()))
        context.append(t)
    return total


def greedy_decode(model: BigramModel, prompt: list[int], n: int) -> list[int]:
    context = list(prompt)
    for _ in range(n):
        context.append(greedy(model.next_logits([context])[0]))
    return context[len(prompt) :]


def test_greedy_falls_into_the_trap_and_beam_search_does_not() -> None:
    assert greedy_decode(TRAP, [0], 2) == [1, 1]
    best = beam_search(TRAP, [0], beam_width=2, max_new_tokens=2)
    assert best.tokens == (2, 3)
    assert best.score == pytest.approx(np.log(0.36))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exhaustive_beam_matches_brute_force_best(seed: int) -> None:
    model = random_bigram(4, seed)
    brute = max(itertools.product(range(4), repeat=3), key=lambda s: log_prob(model, [0], s))
    best = beam_search(model, [0], beam_width=16, max_new_tokens=3)
    assert best.tokens == brute
    assert best.score == pytest.approx(log_prob(model, [0], brute))


def test_beam_search_stops_at_eos_and_marks_the_hypothesis_finished() -> None:
    # From the start, eos (3) is nearly certain: the best hypothesis is the one-token (3,).
    model = BigramModel(
        np.log([[0.05, 0.05, 0.0001, 0.8999], [0.5, 0.5, 1e-9, 1e-9]] + [[0.25] * 4] * 2)
    )
    best = beam_search(model, [0], beam_width=3, max_new_tokens=5, eos_id=3)
    assert best.tokens == (3,) and best.finished


def test_beam_search_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="beam_width"):
        beam_search(TRAP, [0], beam_width=0, max_new_tokens=2)
    with pytest.raises(ValueError, match="prompt"):
        beam_search(TRAP, [], beam_width=1, max_new_tokens=2)


# 0 and 1 point at each other with high probability, so greedy decoding loops 0,1,0,1,...
LOOP = BigramModel(
    np.log(
        [
            [0.01, 0.5, 0.2, 0.2, 0.09],
            [0.5, 0.01, 0.2, 0.09, 0.2],
            [0.3, 0.3, 0.01, 0.2, 0.19],
            [0.3, 0.3, 0.19, 0.01, 0.2],
            [0.3, 0.3, 0.2, 0.19, 0.01],
        ]
    )
)


def test_contrastive_search_with_alpha_zero_is_greedy() -> None:
    assert contrastive_search(LOOP, [0], top_k=3, alpha=0.0, max_new_tokens=8) == greedy_decode(
        LOOP, [0], 8
    )


def test_contrastive_search_breaks_the_loop_greedy_falls_into() -> None:
    looped = greedy_decode(LOOP, [0], 8)
    assert set(looped) == {0, 1}
    varied = contrastive_search(LOOP, [0], top_k=3, alpha=0.6, max_new_tokens=8)
    # The candidate whose state (its one-hot token) was already visited is penalised by 0.6.
    assert varied[:3] == [1, 2, 3]
    assert len(set(varied)) > len(set(looped))
