"""The sampling library: logit processors, decoding strategies, speculative decoding.

    import numpy as np
    from gateway.sampling import probabilities, sample
    probs = probabilities(logits, temperature=0.7, top_p=0.9)   # exactly what is drawn from
    token = sample(logits, rng=np.random.default_rng(7), temperature=0.7, top_p=0.9)

The public API is exactly ``__all__``.
"""

from gateway.sampling.model import LanguageModel
from gateway.sampling.processors import (
    apply_repetition_penalty,
    greedy,
    probabilities,
    sample,
    sample_batch,
)
from gateway.sampling.search import Hypothesis, beam_search, contrastive_search
from gateway.sampling.speculative import (
    SpeculativeStats,
    speculative_generate,
    speculative_generate_batch,
)

__all__ = [
    "Hypothesis",
    "LanguageModel",
    "SpeculativeStats",
    "apply_repetition_penalty",
    "beam_search",
    "contrastive_search",
    "greedy",
    "probabilities",
    "sample",
    "sample_batch",
    "speculative_generate",
    "speculative_generate_batch",
]
