"""Logit processors: the exact distribution a sampler draws from, and the draw itself.

    >>> import numpy as np
    >>> probabilities(np.log([0.5, 0.3, 0.2]), top_p=0.75).round(3).tolist()
    [0.625, 0.375, 0.0]
    >>> sample(np.log([0.5, 0.3, 0.2]), rng=np.random.default_rng(0), temperature=0)
    0

Everything works on the last axis, so a batch of rows (shape ``(..., vocab)``) is processed in
one call. The order is fixed and documented because it changes the answer: temperature first,
then top-k, then top-p, then min-p, renormalising after each filter. Ties are always broken
towards the lower token index so that the same logits give the same distribution everywhere.
Randomness comes only from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Top-p compares a float cumulative sum with p; without a little slack, mass that reaches p
# exactly on paper (0.1 + 0.2 vs 0.3) can fall one ulp short and admit an extra token.
_TOP_P_SLACK = 1e-12


def _as_logits(logits: npt.ArrayLike) -> FloatArray:
    arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[-1] == 0 or arr.size == 0:
        raise ValueError("logits must be a non-empty array with the vocabulary on the last axis")
    if np.isnan(arr).any():
        raise ValueError("logits contain NaN; the model output is broken")
    if np.isposinf(arr).any():
        raise ValueError("logits contain +inf; use large finite values instead")
    if np.isneginf(arr).all(axis=-1).any():
        raise ValueError("every logit in a row is -inf; no token can be drawn")
    return arr


def validate_parameters(
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> None:
    """Raise ValueError for a parameter outside its domain, naming the parameter and the range."""
    if not np.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
    for name, value in (("top_p", top_p), ("min_p", min_p)):
        if value is not None and not (0.0 < value <= 1.0):
            raise ValueError(f"{name} must be in (0, 1], got {value!r}")


def _softmax(scaled: FloatArray) -> FloatArray:
    shifted = scaled - scaled.max(axis=-1, keepdims=True)
    weights = np.exp(shifted)
    normalised: FloatArray = weights / weights.sum(axis=-1, keepdims=True)
    return normalised


def _descending_order(probs: FloatArray) -> npt.NDArray[np.intp]:
    # A stable sort of -p keeps equal probabilities in index order: the deterministic tie-break.
    return np.argsort(-probs, axis=-1, kind="stable")


def _keep_ranked(probs: FloatArray, keep_count: npt.NDArray[np.intp]) -> FloatArray:
    """Keep, per row, the ``keep_count`` most likely tokens (ties to the lower index)."""
    order = _descending_order(probs)
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(probs.shape[-1]), axis=-1)
    kept: FloatArray = np.where(ranks < keep_count[..., None], probs, 0.0)
    return kept


def _renormalise(probs: FloatArray) -> FloatArray:
    out: FloatArray = probs / probs.sum(axis=-1, keepdims=True)
    return out


def probabilities(
    logits: npt.ArrayLike,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> FloatArray:
    """The distribution :func:`sample` draws from, same shape as ``logits``.

    temperature 0 gives a one-hot on the first maximum. top_k keeps exactly k tokens (k larger
    than the vocabulary keeps all). top_p keeps the smallest set of most likely tokens whose
    mass reaches p (p = 1 keeps every token). min_p keeps tokens with p_i >= min_p * max p.
    """
    validate_parameters(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    arr = _as_logits(logits)
    vocab = arr.shape[-1]
    if temperature == 0:
        one_hot = np.zeros_like(arr)
        np.put_along_axis(one_hot, np.argmax(arr, axis=-1)[..., None], 1.0, axis=-1)
        return one_hot
    probs = _softmax(arr / temperature)
    if top_k is not None and top_k < vocab:
        probs = _renormalise(_keep_ranked(probs, np.full(arr.shape[:-1], top_k, dtype=np.intp)))
    if top_p is not None and top_p < 1.0:
        sorted_probs = np.take_along_axis(probs, _descending_order(probs), axis=-1)
        cumulative = np.cumsum(sorted_probs, axis=-1)
        # Count of tokens before the mass reaches p, plus the one that reaches it.
        keep = (cumulative < top_p - _TOP_P_SLACK).sum(axis=-1) + 1
        probs = _renormalise(_keep_ranked(probs, np.minimum(keep, vocab)))
    if min_p is not None:
        threshold = min_p * probs.max(axis=-1, keepdims=True)
        probs = _renormalise(np.where(probs >= threshold, probs, 0.0))
    return probs


def draw(probs: FloatArray, rng: np.random.Generator) -> npt.NDArray[np.intp]:
    """One draw per row of a (..., vocab) probability array, by inverse CDF (vectorised)."""
    cumulative = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1])[..., None] * cumulative[..., -1:]
    # side="right" semantics: the first index whose cumulative mass exceeds u; a zero-mass token
    # has the same cumulative value as its predecessor and can never be chosen.
    index = (cumulative <= u).sum(axis=-1)
    chosen: npt.NDArray[np.intp] = np.minimum(index, probs.shape[-1] - 1).astype(np.intp)
    return chosen


def sample(
    logits: npt.ArrayLike,
    *,
    rng: np.random.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> int:
    """Draw one token id from ``probabilities(logits, ...)`` (1-D logits)."""
    arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"sample takes 1-D logits, got shape {arr.shape}; use sample_batch")
    probs = probabilities(arr, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    return int(draw(probs, rng))


def sample_batch(
    logits: npt.ArrayLike,
    *,
    rng: np.random.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> npt.NDArray[np.intp]:
    """One independent draw per row of (..., vocab) logits."""
    probs = probabilities(logits, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    return draw(probs, rng)


def greedy(logits: npt.ArrayLike) -> int:
    """The most likely token of 1-D logits; the lower index wins a tie."""
    arr = _as_logits(logits)
    if arr.ndim != 1:
        raise ValueError(f"greedy takes 1-D logits, got shape {arr.shape}")
    return int(np.argmax(arr))


def apply_repetition_penalty(
    logits: npt.ArrayLike, generated: Iterable[int], penalty: float
) -> FloatArray:
    """Return a copy where every token already generated is made less likely.

    Positive logits are divided by ``penalty`` and negative ones multiplied by it (the CTRL rule),
    so penalty > 1 always lowers the token's logit; 1 is a no-op. Each token counts once however
    often it was generated.
    """
    if not np.isfinite(penalty) or penalty <= 0:
        raise ValueError(f"repetition penalty must be a finite number > 0, got {penalty!r}")
    out = _as_logits(logits).copy()
    ids = np.unique(np.fromiter(generated, dtype=np.intp))
    if ids.size == 0:
        return out
    vocab = out.shape[-1]
    if ids.min() < 0 or ids.max() >= vocab:
        raise ValueError(f"generated token ids must be in [0, {vocab}), got {ids.tolist()}")
    chosen = out[..., ids]
    out[..., ids] = np.where(chosen > 0, chosen / penalty, chosen * penalty)
    return out
