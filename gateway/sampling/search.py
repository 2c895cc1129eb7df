"""Deterministic decoding strategies over a :class:`LanguageModel`: beam and contrastive search.

    best = beam_search(model, [bos], beam_width=4, max_new_tokens=8, eos_id=eos)
    best.tokens, best.score   # the continuation and its total log-probability

Both strategies score every candidate of a step in one batched model call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gateway.sampling.model import LanguageModel


@dataclass(frozen=True, slots=True)
class Hypothesis:
    tokens: tuple[int, ...]  # the generated continuation, without the prompt
    score: float  # sum of the log-probabilities of ``tokens`` under the model
    finished: bool  # ended with eos_id


def _log_softmax(logits: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    out: npt.NDArray[np.float64] = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return out


def _check_common(max_new_tokens: int, prompt: Sequence[int]) -> None:
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if len(prompt) == 0:
        raise ValueError("the prompt must hold at least one token (a start token if nothing else)")


def beam_search(
    model: LanguageModel,
    prompt: Sequence[int],
    *,
    beam_width: int,
    max_new_tokens: int,
    eos_id: int | None = None,
    length_penalty: float = 0.0,
) -> Hypothesis:
    """The highest-scoring continuation found with ``beam_width`` beams.

    The score is the summed log-probability divided by ``len(tokens) ** length_penalty``
    (0, the default, compares raw log-probabilities). A hypothesis that emits ``eos_id`` is set
    aside as finished; search stops when ``max_new_tokens`` are reached or no live beam can
    still beat the best finished one. With ``beam_width >= vocab ** (max_new_tokens - 1)`` the
    search is exhaustive, which the tests use to know the true best.
    """
    _check_common(max_new_tokens, prompt)
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")

    def normalised(h: Hypothesis) -> float:
        return h.score / float(max(len(h.tokens), 1) ** length_penalty)

    base = tuple(prompt)
    beams = [Hypothesis((), 0.0, False)]
    finished: list[Hypothesis] = []
    for _ in range(max_new_tokens):
        logp = _log_softmax(model.next_logits([base + b.tokens for b in beams]))
        totals = np.array([b.score for b in beams])[:, None] + logp
        flat = totals.ravel()
        # Stable order: equal scores keep (beam, token) order, so results are reproducible.
        order = np.argsort(-flat, kind="stable")
        live: list[Hypothesis] = []
        for index in order:
            if not np.isfinite(flat[index]):
                break
            beam_index, token = divmod(int(index), logp.shape[1])
            extended = Hypothesis(
                (*beams[beam_index].tokens, token), float(flat[index]), token == eos_id
            )
            (finished if extended.finished else live).append(extended)
            if len(live) == beam_width:
                break
        if not live:
            break
        beams = live
        # Log-probabilities only fall, so with no length normalisation a live beam that already
        # scores below the best finished one can never overtake it.
        if (
            finished
            and length_penalty == 0.0
            and max(b.score for b in beams) < max(f.score for f in finished)
        ):
            break
    candidates = finished + beams
    return max(candidates, key=normalised)


def _unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    out: npt.NDArray[np.float64] = rows / np.where(norms == 0, 1.0, norms)
    return out


def contrastive_search(
    model: LanguageModel,
    prompt: Sequence[int],
    *,
    top_k: int,
    alpha: float,
    max_new_tokens: int,
    eos_id: int | None = None,
) -> list[int]:
    """Contrastive search (Su et al., 2022): at each step pick, among the top_k most likely
    tokens, the argmax of ``(1 - alpha) * p_i - alpha * max_j cos(h_i, h_j)`` where ``h_i`` is the
    state after appending candidate i and ``h_j`` the states of every earlier position.

    alpha = 0 is greedy decoding; larger alpha penalises candidates that would put the model
    back into a state it has already been in, which is what degeneration (loops) looks like.
    """
    _check_common(max_new_tokens, prompt)
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    context = list(prompt)
    previous = _unit(model.hidden_states([context[: i + 1] for i in range(len(context))]))
    generated: list[int] = []
    for _ in range(max_new_tokens):
        logits = model.next_logits([context])[0]
        probs = np.exp(_log_softmax(logits))
        k = min(top_k, probs.shape[0])
        candidates = np.argsort(-probs, kind="stable")[:k]
        states = _unit(model.hidden_states([[*context, int(c)] for c in candidates]))
        degeneration = (states @ previous.T).max(axis=1)
        scores = (1.0 - alpha) * probs[candidates] - alpha * degeneration
        best = int(np.argmax(scores))
        token = int(candidates[best])
        context.append(token)
        generated.append(token)
        previous = np.vstack([previous, states[best]])
        if token == eos_id:
            break
    return generated
