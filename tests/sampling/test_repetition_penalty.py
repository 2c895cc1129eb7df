"""The repetition penalty divides positive logits and multiplies negative ones."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.sampling import apply_repetition_penalty, probabilities


def test_positive_logits_are_divided_and_negative_ones_multiplied() -> None:
    logits = np.array([2.0, -2.0, 1.0, 0.0])
    out = apply_repetition_penalty(logits, [0, 1, 1, 3], 2.0)
    np.testing.assert_allclose(out, [1.0, -4.0, 1.0, 0.0])
    np.testing.assert_allclose(logits, [2.0, -2.0, 1.0, 0.0])  # input untouched


def test_penalised_tokens_lose_probability_whatever_their_sign() -> None:
    logits = np.array([1.5, -0.5, 0.3])
    before = probabilities(logits)
    positive = probabilities(apply_repetition_penalty(logits, [0], 1.3))
    negative = probabilities(apply_repetition_penalty(logits, [1], 1.3))
    assert positive[0] < before[0] and negative[1] < before[1]


def test_penalty_of_one_and_no_history_change_nothing() -> None:
    logits = np.array([1.0, -1.0])
    np.testing.assert_array_equal(apply_repetition_penalty(logits, [0, 1], 1.0), logits)
    np.testing.assert_array_equal(apply_repetition_penalty(logits, [], 3.0), logits)


@pytest.mark.parametrize("penalty", [0.0, -1.0, float("nan")])
def test_invalid_penalty_is_refused(penalty: float) -> None:
    with pytest.raises(ValueError, match="penalty"):
        apply_repetition_penalty([1.0], [0], penalty)


def test_token_outside_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="token ids"):
        apply_repetition_penalty([1.0, 2.0], [2], 1.5)
