"""The n-gram model as a LanguageModel: proper distributions, states, and the strategies on it."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.providers.local import LocalProvider, tokenize
from gateway.sampling import beam_search, contrastive_search, greedy, speculative_generate


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider()


def test_logits_are_normalised_log_probabilities_that_never_produce_specials(
    provider: LocalProvider,
) -> None:
    model = provider.model("local:ngram")
    contexts = [[], model.vocab.ids(tokenize("the payment is")), model.vocab.ids(["zebra"])]
    logits = model.next_logits(contexts)
    assert logits.shape == (3, model.vocab_size)
    np.testing.assert_allclose(np.exp(logits).sum(axis=1), 1.0)
    for special in ("<s>", "<unk>"):
        assert np.isneginf(logits[:, model.vocab.index[special]]).all()


def test_trigram_context_sharpens_the_prediction(provider: LocalProvider) -> None:
    target, draft = provider.model("local:ngram"), provider.model("local:ngram-draft")
    context = [target.vocab.ids(tokenize("sanctions screening compares names with"))]
    t, d = target.next_logits(context)[0], draft.next_logits(context)[0]
    assert target.vocab.words[greedy(t)] == "lists"
    assert t.max() > d.max()  # "names with" -> "lists" is surer than "with" -> anything


def test_hidden_states_depend_on_recent_context_only(provider: LocalProvider) -> None:
    model = provider.model("local:ngram")
    ids = model.vocab.ids(tokenize("the bank keeps its records for at least seven years"))
    states = model.hidden_states([ids, [ids[0], *ids], ids[:-1]])
    assert states.shape == (3, 64)
    np.testing.assert_allclose(states[0], states[1])  # beyond the four-token window
    assert not np.allclose(states[0], states[2])


def test_speculative_decoding_runs_on_target_and_draft(provider: LocalProvider) -> None:
    target, draft = provider.model("local:ngram"), provider.model("local:ngram-draft")
    prompt = target.vocab.ids(tokenize("the reviewer"))
    tokens, stats = speculative_generate(
        target, draft, prompt, k=4, max_new_tokens=30, rng=np.random.default_rng(0)
    )
    assert len(tokens) <= 30 and 0.1 < stats.acceptance_rate <= 1.0
    assert stats.target_calls < len(tokens)


def test_beam_search_scores_at_least_as_well_as_greedy(provider: LocalProvider) -> None:
    model = provider.model("local:ngram")
    prompt = model.vocab.ids(tokenize("a tested control"))
    greedy_path = beam_search(model, prompt, beam_width=1, max_new_tokens=6)
    wide = beam_search(model, prompt, beam_width=4, max_new_tokens=6)
    assert wide.score >= greedy_path.score


def test_contrastive_search_repeats_less_than_greedy(provider: LocalProvider) -> None:
    model = provider.model("local:ngram")
    prompt = model.vocab.ids(tokenize("the reviewer"))
    looped = contrastive_search(model, prompt, top_k=1, alpha=0.0, max_new_tokens=60)
    varied = contrastive_search(model, prompt, top_k=5, alpha=0.6, max_new_tokens=60)
    assert len(set(varied)) > len(set(looped))
