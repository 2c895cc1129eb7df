"""Small table-driven language models with known answers, for testing decoding strategies.

model = BigramModel(np.log([[0.9, 0.1], [0.5, 0.5]]))
model.next_logits([[0], [1, 1]])   # rows 0 and 1 of the table
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


class BigramModel:
    """Next-token logits depend only on the last token; the hidden state is its one-hot vector,
    so two positions are "similar" exactly when they end in the same token."""

    def __init__(self, table: npt.ArrayLike) -> None:
        self.table = np.asarray(table, dtype=np.float64)
        assert self.table.ndim == 2 and self.table.shape[0] == self.table.shape[1]

    @property
    def vocab_size(self) -> int:
        return int(self.table.shape[1])

    def next_logits(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        last = np.fromiter((c[-1] for c in contexts), dtype=np.intp, count=len(contexts))
        rows: npt.NDArray[np.float64] = self.table[last]
        return rows

    def hidden_states(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        last = np.fromiter((c[-1] for c in contexts), dtype=np.intp, count=len(contexts))
        states: npt.NDArray[np.float64] = np.eye(self.vocab_size)[last]
        return states


def random_bigram(vocab: int, seed: int, scale: float = 1.5) -> BigramModel:
    return BigramModel(np.random.default_rng(seed).normal(0.0, scale, size=(vocab, vocab)))


def blend(target: BigramModel, other: BigramModel, weight: float) -> BigramModel:
    """A draft that is ``weight`` of the way from ``other`` to ``target`` (1.0 = the target)."""
    return BigramModel(weight * target.table + (1.0 - weight) * other.table)
