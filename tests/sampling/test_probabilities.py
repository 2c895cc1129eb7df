"""`probabilities` against answers worked out by hand, and its refusals of bad parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gateway.sampling import probabilities


def softmax(x: list[float]) -> np.ndarray:
    e = np.exp(np.asarray(x) - max(x))
    return e / e.sum()


LOGITS = np.log([0.5, 0.3, 0.2])


def test_plain_softmax_at_temperature_one() -> None:
    np.testing.assert_allclose(probabilities(LOGITS), [0.5, 0.3, 0.2])


def test_temperature_divides_logits() -> None:
    logits = [2.0, 1.0, -1.0]
    np.testing.assert_allclose(probabilities(logits, temperature=0.5), softmax([4.0, 2.0, -2.0]))


def test_temperature_zero_is_one_hot_on_first_maximum() -> None:
    np.testing.assert_array_equal(probabilities([1.0, 3.0, 3.0, 0.0], temperature=0), [0, 1, 0, 0])


def test_top_k_keeps_exactly_k_and_breaks_ties_towards_lower_index() -> None:
    probs = probabilities([1.0, 2.0, 2.0, 2.0], top_k=2)
    np.testing.assert_allclose(probs, [0.0, 0.5, 0.5, 0.0])


def test_top_k_larger_than_vocabulary_changes_nothing() -> None:
    np.testing.assert_allclose(probabilities(LOGITS, top_k=50), [0.5, 0.3, 0.2])
    np.testing.assert_allclose(probabilities(LOGITS, top_k=3), [0.5, 0.3, 0.2])


def test_top_p_keeps_smallest_set_reaching_p() -> None:
    np.testing.assert_allclose(probabilities(LOGITS, top_p=0.8), [0.625, 0.375, 0.0])
    np.testing.assert_allclose(probabilities(LOGITS, top_p=0.5), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(probabilities(LOGITS, top_p=0.81), [0.5, 0.3, 0.2])


def test_top_p_ties_are_broken_towards_lower_index() -> None:
    np.testing.assert_allclose(probabilities([0.0, 0.0, 0.0, 0.0], top_p=0.5), [0.5, 0.5, 0, 0])
    np.testing.assert_allclose(probabilities([0.0, 0.0, 0.0, 0.0], top_p=0.51), [1 / 3] * 3 + [0])


def test_top_p_of_one_keeps_every_token_even_tiny_ones() -> None:
    logits = [0.0, -30.0, -60.0]
    probs = probabilities(logits, top_p=1.0)
    np.testing.assert_allclose(probs, softmax(logits))
    assert (probs > 0).all()


def test_min_p_keeps_tokens_above_fraction_of_max() -> None:
    np.testing.assert_allclose(probabilities(LOGITS, min_p=0.5), [0.625, 0.375, 0.0])
    np.testing.assert_allclose(probabilities(LOGITS, min_p=0.4), [0.5, 0.3, 0.2])
    np.testing.assert_allclose(probabilities(LOGITS, min_p=1.0), [1.0, 0.0, 0.0])


def test_filters_apply_in_order_temperature_top_k_top_p_min_p() -> None:
    logits = np.log([0.4, 0.3, 0.2, 0.1])
    # top_k=3 → [4/9, 3/9, 2/9]; top_p=0.7 → first two reach 7/9 → [4/7, 3/7]; min_p=0.8 → 3/7
    # is below 0.8·4/7, so only the first survives.
    np.testing.assert_allclose(probabilities(logits, top_k=3, top_p=0.7), [4 / 7, 3 / 7, 0, 0])
    np.testing.assert_allclose(probabilities(logits, top_k=3, top_p=0.7, min_p=0.8), [1, 0, 0, 0])


def test_very_peaked_distribution_stays_finite() -> None:
    probs = probabilities([1000.0, 0.0, -1000.0])
    np.testing.assert_array_equal(probs, [1.0, 0.0, 0.0])
    cold = probabilities([1.0, 0.9], temperature=0.01)
    np.testing.assert_allclose(cold, [1 / (1 + math.exp(-10)), math.exp(-10) / (1 + math.exp(-10))])


def test_minus_infinity_masks_a_token() -> None:
    np.testing.assert_allclose(probabilities([0.0, -np.inf, 0.0]), [0.5, 0.0, 0.5])


def test_batch_rows_are_processed_independently() -> None:
    batch = np.array([LOGITS, [0.0, 0.0, 0.0]])
    out = probabilities(batch, top_p=0.8)
    np.testing.assert_allclose(out[0], probabilities(LOGITS, top_p=0.8))
    np.testing.assert_allclose(out[1], probabilities([0.0, 0.0, 0.0], top_p=0.8))


def test_min_p_at_high_temperature_excludes_tail_that_top_p_admits() -> None:
    logits = np.array([5.0, 3.0] + [0.0] * 20)
    nucleus = probabilities(logits, temperature=2.0, top_p=0.9)
    min_p = probabilities(logits, temperature=2.0, min_p=0.1)
    tail = slice(2, None)
    assert (nucleus[tail] > 0).sum() >= 15  # the nucleus needs most of the flat tail to reach 0.9
    assert (min_p[tail] == 0).all()  # each tail token is < 0.1 x the top token, so min-p drops it
    assert min_p[0] > 0 and min_p[1] > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": 1.5}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"min_p": 0.0}, "min_p"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
    ],
)
def test_invalid_parameters_raise_value_error_naming_them(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        probabilities(LOGITS, **kwargs)


@pytest.mark.parametrize(
    ("logits", "message"),
    [([], "non-empty"), ([0.0, float("nan")], "NaN"), ([-np.inf, -np.inf], "-inf")],
)
def test_unusable_logits_raise_value_error(logits: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        probabilities(logits)
