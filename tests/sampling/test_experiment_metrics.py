"""Diversity metrics and the default experiment configurations."""

from __future__ import annotations

import pydantic
import pytest

from gateway.experiment import DEFAULT_LOCAL_CONFIGS, SamplingConfig, diversity_metrics


def test_metrics_on_a_hand_counted_example() -> None:
    metrics = diversity_metrics(
        ["the payment is held", "the payment is released", "the payment is held"]
    )
    assert metrics["samples"] == 3
    assert metrics["unique_ratio"] == pytest.approx(2 / 3)
    assert metrics["distinct_1"] == pytest.approx(5 / 12)  # the payment is held released
    assert metrics["distinct_2"] == pytest.approx(4 / 9)  # bigrams never cross samples
    assert metrics["avg_length"] == pytest.approx(4.0)


def test_identical_samples_have_minimal_diversity() -> None:
    metrics = diversity_metrics(["a b"] * 4)
    assert metrics["unique_ratio"] == 0.25 and metrics["distinct_2"] == 0.25


def test_empty_texts_do_not_divide_by_zero_and_no_samples_is_an_error() -> None:
    assert diversity_metrics(["", ""])["distinct_1"] == 0.0
    with pytest.raises(ValueError, match="at least one sample"):
        diversity_metrics([])


def test_default_configs_are_the_issue_list_and_map_to_body_params() -> None:
    assert [c.body_params() for c in DEFAULT_LOCAL_CONFIGS] == [
        {"temperature": 0.0},
        {"temperature": 0.3, "top_p": 0.9},
        {"temperature": 0.7, "top_p": 0.95},
        {"temperature": 1.0, "top_p": 0.95},
        {"temperature": 1.2, "top_p": 1.0},
    ]


def test_config_rejects_out_of_range_and_unknown_fields() -> None:
    with pytest.raises(pydantic.ValidationError):
        SamplingConfig(name="x", temperature=1.0, top_p=0.0)
    with pytest.raises(pydantic.ValidationError):
        SamplingConfig(name="x", temperature=1.0, typical_p=0.5)  # type: ignore[call-arg]
