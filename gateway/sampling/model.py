"""What a decoding strategy needs from a language model: batched next-token logits and states.

    class Bigram:
        vocab_size = 3
        def next_logits(self, contexts): return table[[c[-1] for c in contexts]]
        def hidden_states(self, contexts): return embeddings[[c[-1] for c in contexts]]

A context is a sequence of token ids. Both methods take a batch of contexts and return one row
per context, so a strategy can score many candidates (a beam, k speculative drafts) in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt


class LanguageModel(Protocol):
    @property
    def vocab_size(self) -> int:
        """Number of token ids; logits rows have this length."""
        ...

    def next_logits(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        """Logits of the token after each context, shape (len(contexts), vocab_size)."""
        ...

    def hidden_states(self, contexts: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
        """The model's state after the last token of each context, shape (len(contexts), dim)."""
        ...
