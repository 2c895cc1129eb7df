"""The local model's language model: a word-level n-gram model over the shipped corpus.

Text is lower-cased and split into words and punctuation marks; every corpus paragraph is one
training sequence framed by ``<s>`` and ``</s>``. Probabilities are interpolated recursively
with a Dirichlet prior (Witten-Bell-like):
``P_n(w | h) = (c(h w) + beta * P_{n-1}(w | h')) / (c(h) + beta)``, ending in an add-one
unigram, so every word has non-zero probability and the distribution sums to one. Logits are
the log-probabilities; ``<s>`` and ``<unk>`` are masked (-inf) so they are never generated.
The hidden state at a position is a fixed random projection (seeded Gaussian embeddings, 64
dimensions) of the exponentially decayed counts of the last four tokens: two positions look
alike when their recent contexts do, which is what contrastive search needs.

The model version is ``sha256:`` over the canonical JSON of everything that determines the
outputs (vocabulary, n-gram counts, beta, embedding seed and shape), so a corpus or hyper-
parameter change is a new model version in the audit log.
"""

from __future__ import annotations

import importlib.resources
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from audit.canonical import canonical_digest

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
_TOKEN = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*|[.,;:!?]")
_NO_SPACE_BEFORE = frozenset(".,;:!?")
_BETA = 1.0
_STATE_DIM = 64
_STATE_WINDOW = 4
_STATE_DECAY = 0.5
_EMBEDDING_SEED = 20261130

# model id -> n-gram order. The draft shares the target's vocabulary (speculative decoding
# compares the two distributions token by token) but sees one word of context less.
KNOWN_MODELS: Mapping[str, int] = {"local:ngram": 3, "local:ngram-draft": 2}


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def detokenize(words: Iterable[str]) -> str:
    out: list[str] = []
    for word in words:
        if out and word not in _NO_SPACE_BEFORE:
            out.append(" ")
        out.append(word)
    return "".join(out)


def corpus_paragraphs() -> list[list[str]]:
    folder = importlib.resources.files("gateway.providers").joinpath("corpus")
    paragraphs: list[list[str]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".txt"):
            continue
        # The first paragraph of each file is its licence header, not training text.
        blocks = entry.read_text(encoding="utf-8").split("\n\n")[1:]
        paragraphs.extend(tokens for b in blocks if (tokens := tokenize(b)))
    return paragraphs


@dataclass(frozen=True)
class Vocabulary:
    words: tuple[str, ...]
    index: Mapping[str, int] = field(repr=False)

    @classmethod
    def from_paragraphs(cls, paragraphs: Sequence[Sequence[str]]) -> Vocabulary:
        corpus_words = sorted({w for p in paragraphs for w in p})
        words = (BOS, EOS, UNK, *corpus_words)
        return cls(words, {w: i for i, w in enumerate(words)})

    def ids(self, words: Iterable[str]) -> list[int]:
        unk = self.index[UNK]
        return [self.index.get(w, unk) for w in words]


class NGramModel:
    """A smoothed word n-gram model; implements ``gateway.sampling.LanguageModel``."""

    def __init__(self, paragraphs: Sequence[Sequence[str]], vocab: Vocabulary, order: int):
        self.order = order
        self.vocab = vocab
        size = len(vocab.words)
        counts: list[Counter[tuple[int, ...]]] = [Counter() for _ in range(order + 1)]
        for paragraph in paragraphs:
            ids = [vocab.index[BOS]] * (order - 1) + vocab.ids(paragraph) + [vocab.index[EOS]]
            for end in range(order - 1, len(ids)):
                for n in range(1, order + 1):
                    counts[n][tuple(ids[end - n + 1 : end + 1])] += 1
        self._counts = counts
        unigram = np.ones(size)
        for (word,), c in counts[1].items():
            unigram[word] += c
        # Never generated, so they get no mass (their logit is -inf); EOS keeps its count.
        unigram[[vocab.index[BOS], vocab.index[UNK]]] = 0.0
        self._unigram = unigram / unigram.sum()
        # history tuple -> (next ids, their counts, total) for each order above the unigram.
        self._tables: list[
            dict[tuple[int, ...], tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], float]]
        ] = [{} for _ in range(order + 1)]
        for n in range(2, order + 1):
            grouped: dict[tuple[int, ...], dict[int, int]] = {}
            for gram, c in counts[n].items():
                grouped.setdefault(gram[:-1], {})[gram[-1]] = c
            for history, nexts in grouped.items():
                ids_arr = np.fromiter(nexts.keys(), dtype=np.intp)
                vals = np.fromiter(nexts.values(), dtype=np.float64)
                self._tables[n][history] = (ids_arr, vals, float(vals.sum()))
        self._embeddings = np.random.default_rng(_EMBEDDING_SEED).normal(
            0.0, 1.0 / np.sqrt(_STATE_DIM), size=(size, _STATE_DIM)
        )

    @property
    def vocab_size(self) -> int:
        return len(self.vocab.words)

    def _distribution(self, context: Sequence[int]) -> npt.NDArray[np.float64]:
        padded = [self.vocab.index[BOS]] * (self.order - 1) + list(context)
        probs: npt.NDArray[np.float64] = self._unigram
        for n in range(2, self.order + 1):
            entry = self._tables[n].get(tuple(padded[len(padded) - n + 1 :]))
            if entry is not None:
                ids, vals, total = entry
                probs = probs * _BETA
                probs[ids] += vals
                probs = probs / (total + _BETA)
        return probs

    def next_logits(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        rows = np.array([self._distribution(c) for c in contexts])
        logits: npt.NDArray[np.float64] = np.full(rows.shape, -np.inf)
        np.log(rows, out=logits, where=rows > 0)
        return logits

    def hidden_states(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        weights = _STATE_DECAY ** np.arange(_STATE_WINDOW)
        out = np.zeros((len(contexts), _STATE_DIM))
        for row, context in enumerate(contexts):
            recent = list(context)[::-1][:_STATE_WINDOW]
            out[row] = weights[: len(recent)] @ self._embeddings[recent]
        return out

    @cached_property
    def version(self) -> str:
        weights = {
            "format": "gateway-ngram-1",
            "order": self.order,
            "beta": _BETA,
            "vocabulary": list(self.vocab.words),
            "counts": sorted(
                [*gram, c] for n in range(1, self.order + 1) for gram, c in self._counts[n].items()
            ),
            "state": {
                "seed": _EMBEDDING_SEED,
                "dim": _STATE_DIM,
                "window": _STATE_WINDOW,
                "decay": _STATE_DECAY,
            },
        }
        return canonical_digest(weights)
