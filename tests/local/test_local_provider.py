"""The offline provider: Messages-API replies, exact sampling, versions, refusals."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from gateway.errors import GatewayError
from gateway.providers.local import LocalProvider, LocalReply, detokenize, tokenize
from gateway.sampling import greedy, probabilities
from tests.sampling.chisq import ALPHA, chi_square_pvalue

PROMPT = "The reviewer reads the"


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider()


def body(**overrides: object) -> dict:
    base: dict = {
        "model": "local:ngram",
        "max_tokens": 30,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    base.update(overrides)
    return base


def text_of(reply: LocalReply) -> str:
    return str(reply.response["content"][0]["text"])


def test_reply_has_the_messages_api_shape_and_raw_bytes_match(provider: LocalProvider) -> None:
    reply = provider.complete(body(), rng=np.random.default_rng(1))
    r = reply.response
    assert re.fullmatch(r"msg_local_[0-9a-f]{24}", r["id"])
    assert (r["type"], r["role"], r["model"]) == ("message", "assistant", "local:ngram")
    assert r["content"][0]["type"] == "text" and r["content"][0]["text"]
    assert r["stop_reason"] in {"end_turn", "max_tokens", "stop_sequence"}
    assert r["usage"] == {"input_tokens": 4, "output_tokens": r["usage"]["output_tokens"]}
    assert 1 <= r["usage"]["output_tokens"] <= 30
    assert json.loads(reply.raw) == r


def test_same_seed_same_reply_and_different_seeds_differ(provider: LocalProvider) -> None:
    a = provider.complete(body(), rng=np.random.default_rng(5))
    b = provider.complete(body(), rng=np.random.default_rng(5))
    assert a.raw == b.raw
    texts = {text_of(provider.complete(body(), rng=np.random.default_rng(s))) for s in range(6)}
    assert len(texts) > 1


def test_temperature_zero_is_greedy_decoding_whatever_the_rng(provider: LocalProvider) -> None:
    model = provider.model("local:ngram")
    context = model.vocab.ids(tokenize(PROMPT))
    words = []
    for _ in range(12):
        token = greedy(model.next_logits([context])[0])
        if model.vocab.words[token] == "</s>":
            break
        context.append(token)
        words.append(model.vocab.words[token])
    for seed in (1, 2):
        reply = provider.complete(
            body(max_tokens=12, temperature=0), rng=np.random.default_rng(seed)
        )
        assert text_of(reply) == detokenize(words)
    top_k_one = provider.complete(body(max_tokens=12, top_k=1), rng=np.random.default_rng(3))
    assert text_of(top_k_one) == detokenize(words)


@pytest.mark.parametrize(
    "config",
    [{"temperature": 1.3, "top_k": 6}, {"temperature": 0.8, "top_p": 0.9}, {"min_p": 0.2}],
    ids=["top_k", "top_p", "min_p"],
)
def test_first_word_distribution_is_exactly_the_sampling_distribution(
    provider: LocalProvider, config: dict
) -> None:
    model = provider.model("local:ngram")
    logits = model.next_logits([model.vocab.ids(tokenize(PROMPT))])[0]
    expected = probabilities(logits, **config)
    rng = np.random.default_rng(11)
    index = model.vocab.index
    draws = np.array(
        [
            index[tokenize(text_of(provider.complete(body(max_tokens=1, **config), rng=rng)))[0]]
            for _ in range(3_000)
        ]
    )
    assert chi_square_pvalue(draws, expected) > ALPHA


def test_stop_sequence_cuts_the_text_and_is_reported(provider: LocalProvider) -> None:
    full = text_of(provider.complete(body(max_tokens=30, temperature=0)))
    stop = full.split()[3]  # a word the greedy continuation is known to produce
    reply = provider.complete(body(max_tokens=30, temperature=0, stop_sequences=["zzz", stop]))
    assert reply.response["stop_reason"] == "stop_sequence"
    assert reply.response["stop_sequence"] == stop
    assert text_of(reply) == full[: full.index(stop)]


def test_max_tokens_and_end_turn_are_reported(provider: LocalProvider) -> None:
    short = provider.complete(body(max_tokens=3, temperature=0))
    assert short.response["stop_reason"] == "max_tokens"
    assert short.response["usage"]["output_tokens"] == 3
    rng = np.random.default_rng(0)
    reasons = [provider.complete(body(max_tokens=200), rng=rng).response for _ in range(10)]
    ended = [r for r in reasons if r["stop_reason"] == "end_turn"]
    assert ended and all(r["usage"]["output_tokens"] < 200 for r in ended)


def test_text_blocks_and_system_are_read_like_strings(provider: LocalProvider) -> None:
    as_blocks = body(
        system=[{"type": "text", "text": "Controls are tested."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
    )
    as_strings = body(system="Controls are tested.")
    a = provider.complete(as_blocks, rng=np.random.default_rng(2))
    b = provider.complete(as_strings, rng=np.random.default_rng(2))
    assert a.raw == b.raw
    assert a.response["usage"]["input_tokens"] == 4 + 4


def test_model_version_is_a_stable_digest_of_the_weights() -> None:
    first, second = LocalProvider(), LocalProvider()
    version = first.model_version("local:ngram")
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", version)
    assert version == second.model_version("local:ngram")
    assert version != first.model_version("local:ngram-draft")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model": "local:gpt"}, "local:ngram, local:ngram-draft"),
        ({"thinking": {"type": "enabled"}}, "thinking"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"temperature": -1}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image"}]}]}, "text"),
        ({"stop_sequences": [""]}, "stop_sequences"),
        ({"stream": True}, "stream"),
    ],
)
def test_requests_it_cannot_honour_are_refused(
    provider: LocalProvider, overrides: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        provider.complete(body(**overrides))
    assert isinstance(caught.value, GatewayError)


def test_unknown_model_id_names_the_known_ones(provider: LocalProvider) -> None:
    with pytest.raises(ValueError, match="local:ngram, local:ngram-draft"):
        provider.model_version("claude-sonnet-4-6")
