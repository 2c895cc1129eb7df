"""Sampling experiments, the pure half: the configurations to compare and the diversity metrics.

    from gateway.experiment import DEFAULT_LOCAL_CONFIGS, diversity_metrics
    for config in DEFAULT_LOCAL_CONFIGS:
        body = {**base_body, **config.body_params()}   # then draw n samples through the gateway
    diversity_metrics(["the payment is held", "the payment is released"])
    # samples 2, unique_ratio 1.0, distinct_1 0.625, distinct_2 0.667, avg_length 4.0

The CLI (`gateway experiment`) draws the samples; nothing here does I/O.
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway.sampling.processors import validate_parameters


class SamplingConfig(BaseModel):
    """One row of an experiment: a name and the sampling parameters sent in the request body."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    temperature: float = Field(ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=1)
    min_p: float | None = Field(default=None, gt=0.0, le=1.0)

    def body_params(self) -> dict[str, Any]:
        """The Messages-API keys to merge into a request body; unset filters are left out."""
        validate_parameters(
            temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, min_p=self.min_p
        )
        params: dict[str, Any] = {"temperature": self.temperature}
        for key in ("top_p", "top_k", "min_p"):
            if (value := getattr(self, key)) is not None:
                params[key] = value
        return params


# Issue 6 item 5's defaults for the local model. Claude models get only what they honour
# (the planner decides); these go to local:* where every parameter is honoured.
DEFAULT_LOCAL_CONFIGS: tuple[SamplingConfig, ...] = (
    SamplingConfig(name="greedy", temperature=0.0),
    SamplingConfig(name="T0.3 top_p0.9", temperature=0.3, top_p=0.9),
    SamplingConfig(name="T0.7 top_p0.95", temperature=0.7, top_p=0.95),
    SamplingConfig(name="T1.0 top_p0.95", temperature=1.0, top_p=0.95),
    SamplingConfig(name="T1.2 top_p1.0", temperature=1.2, top_p=1.0),
)


def _words(text: str) -> list[str]:
    return text.lower().split()


def diversity_metrics(samples: list[str]) -> dict[str, float | int]:
    """Diversity of n samples of one prompt under one configuration.

    unique_ratio: distinct samples / samples (exact string comparison).
    distinct_1, distinct_2: distinct word unigrams (bigrams) / all unigrams (bigrams), pooled
    over the samples (Li et al., 2016); bigrams do not cross sample boundaries. 0.0 when there
    are none. avg_length: mean words per sample. Words are lower-cased, whitespace-separated.
    """
    if not samples:
        raise ValueError("diversity needs at least one sample")
    tokenised = [_words(s) for s in samples]
    unigrams = [w for words in tokenised for w in words]
    bigrams = [pair for words in tokenised for pair in itertools.pairwise(words)]
    return {
        "samples": len(samples),
        "unique_ratio": len(set(samples)) / len(samples),
        "distinct_1": len(set(unigrams)) / len(unigrams) if unigrams else 0.0,
        "distinct_2": len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
        "avg_length": len(unigrams) / len(samples),
    }
