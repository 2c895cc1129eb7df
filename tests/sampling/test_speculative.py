"""Speculative decoding samples exactly the target's distribution, whatever the draft."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gateway.sampling import probabilities, speculative_generate, speculative_generate_batch
from tests.sampling.chisq import ALPHA, chi_square_pvalue
from tests.sampling.toy_models import BigramModel, blend, random_bigram

VOCAB = 4
RUNS = 20_000
TARGET = random_bigram(VOCAB, seed=11)
UNRELATED = random_bigram(VOCAB, seed=12, scale=2.5)


def sequence_probabilities(
    model: BigramModel, start: int, length: int, **config: float
) -> np.ndarray:
    """Exact probability of every sequence of ``length`` tokens (index = base-VOCAB number)."""
    out = np.zeros(VOCAB**length)
    for index, seq in enumerate(itertools.product(range(VOCAB), repeat=length)):
        p, last = 1.0, start
        for t in seq:
            p *= probabilities(model.table[last], **config)[t]
            last = t
        out[index] = p
    return out


def encode(sequences: list[list[int]]) -> np.ndarray:
    arr = np.array(sequences)
    return (arr * VOCAB ** np.arange(arr.shape[1] - 1, -1, -1)).sum(axis=1)


@pytest.mark.parametrize("weight", [0.0, 0.5, 0.9])
@pytest.mark.parametrize(
    "config", [{}, {"temperature": 0.7, "top_p": 0.9}], ids=["plain", "T0.7-top_p0.9"]
)
def test_output_distribution_equals_target_for_any_draft(weight: float, config: dict) -> None:
    draft = blend(TARGET, UNRELATED, weight)
    outputs, stats = speculative_generate_batch(
        TARGET, draft, [[0]] * RUNS, k=2, max_new_tokens=3, rng=np.random.default_rng(7), **config
    )
    assert all(len(o) == 3 for o in outputs)
    expected = sequence_probabilities(TARGET, 0, 3, **config)
    assert chi_square_pvalue(encode(outputs), expected) > ALPHA
    first = np.array([o[0] for o in outputs])
    assert chi_square_pvalue(first, probabilities(TARGET.table[0], **config)) > ALPHA
    assert 0.0 <= stats.acceptance_rate <= 1.0


def test_the_test_detects_sampling_from_the_draft_instead() -> None:
    # Power check: draws that really come from the unrelated model fail against the target.
    outputs, _ = speculative_generate_batch(
        UNRELATED, UNRELATED, [[0]] * RUNS, k=2, max_new_tokens=3, rng=np.random.default_rng(7)
    )
    assert chi_square_pvalue(encode(outputs), sequence_probabilities(TARGET, 0, 3)) < 1e-6


def test_acceptance_rises_as_draft_approaches_target() -> None:
    rates = []
    for weight in [0.0, 0.25, 0.5, 0.75, 1.0]:
        _, stats = speculative_generate_batch(
            TARGET,
            blend(TARGET, UNRELATED, weight),
            [[0]] * 2_000,
            k=4,
            max_new_tokens=12,
            rng=np.random.default_rng(3),
        )
        rates.append(stats.acceptance_rate)
    assert rates == sorted(rates) and rates[0] < rates[-1]
    assert rates[-1] == 1.0  # a perfect draft is always accepted


def test_perfect_draft_needs_one_target_call_per_k_plus_one_tokens() -> None:
    tokens, stats = speculative_generate(
        TARGET, TARGET, [0], k=4, max_new_tokens=20, rng=np.random.default_rng(1)
    )
    assert len(tokens) == 20
    assert stats.target_calls == 4 and stats.target_calls_per_token == pytest.approx(0.2)


def test_k_zero_is_plain_sampling_one_target_call_per_token() -> None:
    tokens, stats = speculative_generate(
        TARGET, UNRELATED, [0], k=0, max_new_tokens=5, rng=np.random.default_rng(1)
    )
    assert len(tokens) == 5 and stats.target_calls == 5 and stats.proposed == 0


def test_generation_stops_at_eos() -> None:
    table = np.full((VOCAB, VOCAB), -20.0)
    table[:, 3] = 0.0  # token 3 (eos) is all but certain
    model = BigramModel(table)
    tokens, _ = speculative_generate(
        model, model, [0], k=3, max_new_tokens=10, rng=np.random.default_rng(0), eos_id=3
    )
    assert tokens == [3]


def test_vocabulary_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(
            TARGET, random_bigram(3, 1), [0], k=2, max_new_tokens=3, rng=np.random.default_rng(0)
        )
