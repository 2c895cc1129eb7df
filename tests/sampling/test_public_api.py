"""The sampling package exports exactly its documented names."""

import gateway.sampling


def test_sampling_all_is_pinned() -> None:
    assert sorted(gateway.sampling.__all__) == [
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
    for name in gateway.sampling.__all__:
        assert hasattr(gateway.sampling, name)
