"""Every sampler draws from exactly the distribution `probabilities` reports (chi-square)."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.sampling import probabilities, sample, sample_batch
from tests.sampling.chisq import ALPHA, chi_square_pvalue

DRAWS = 20_000
LOGITS = np.random.default_rng(1234).normal(0.0, 1.5, size=12)

CONFIGS = [
    {},
    {"temperature": 0.6},
    {"temperature": 1.7},
    {"top_k": 4},
    {"top_p": 0.8},
    {"temperature": 1.4, "min_p": 0.15},
    {"temperature": 0.8, "top_k": 6, "top_p": 0.9, "min_p": 0.05},
]


@pytest.mark.parametrize(
    "config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
)
def test_batched_draws_match_probabilities(config: dict) -> None:
    rng = np.random.default_rng(2024)
    draws = sample_batch(np.tile(LOGITS, (DRAWS, 1)), rng=rng, **config)
    assert chi_square_pvalue(draws, probabilities(LOGITS, **config)) > ALPHA


def test_single_draw_function_matches_probabilities() -> None:
    rng = np.random.default_rng(99)
    config = {"temperature": 0.9, "top_p": 0.95}
    draws = np.array([sample(LOGITS, rng=rng, **config) for _ in range(DRAWS)])
    assert chi_square_pvalue(draws, probabilities(LOGITS, **config)) > ALPHA


def test_chi_square_has_power_against_a_wrong_distribution() -> None:
    # The same draws judged against the untempered distribution must fail by far, or the
    # passing tests above prove nothing.
    draws = sample_batch(np.tile(LOGITS, (DRAWS, 1)), rng=np.random.default_rng(5), temperature=1.3)
    assert chi_square_pvalue(draws, probabilities(LOGITS)) < 1e-6


def test_temperature_zero_always_draws_first_maximum() -> None:
    rng = np.random.default_rng(0)
    assert {sample([0.0, 2.0, 2.0], rng=rng, temperature=0) for _ in range(100)} == {1}


def test_same_seed_gives_same_draws() -> None:
    a = sample_batch(np.tile(LOGITS, (50, 1)), rng=np.random.default_rng(3), top_p=0.9)
    b = sample_batch(np.tile(LOGITS, (50, 1)), rng=np.random.default_rng(3), top_p=0.9)
    np.testing.assert_array_equal(a, b)
