"""Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a cheap draft model proposes
k tokens, the target scores all of them in one batched call, and an accept/resample rule makes
the output distribution exactly the target's.

    tokens, stats = speculative_generate(target, draft, prompt, k=4, max_new_tokens=32, rng=rng)
    stats.acceptance_rate, stats.target_calls_per_token

Both models' logits go through the same :func:`probabilities` (same temperature, top-k, top-p,
min-p), so the guarantee holds for the processed target distribution p: draft token x with draft
probability q(x) is kept with probability min(1, p(x)/q(x)); on the first rejection the next token
comes from max(0, p - q) renormalised; if all k survive, a bonus token is drawn from p.

``speculative_generate_batch`` runs many independent generations side by side (one model call
per step for the whole batch); the tests use it to draw tens of thousands of sequences quickly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gateway.sampling.model import LanguageModel
from gateway.sampling.processors import draw, probabilities, validate_parameters


@dataclass(frozen=True, slots=True)
class SpeculativeStats:
    generated: int  # tokens returned (after truncation at max_new_tokens / eos)
    proposed: int  # draft tokens offered to the target
    accepted: int  # draft tokens the target kept
    target_calls: int  # batched target calls (one per round)
    draft_calls: int  # batched draft calls (k per round)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def target_calls_per_token(self) -> float:
        return self.target_calls / self.generated if self.generated else 0.0


@dataclass(frozen=True, slots=True)
class _Sampling:
    temperature: float
    top_k: int | None
    top_p: float | None
    min_p: float | None

    def probs(self, logits: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return probabilities(
            logits,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
        )


def speculative_generate(
    target: LanguageModel,
    draft: LanguageModel,
    prompt: Sequence[int],
    *,
    k: int,
    max_new_tokens: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    eos_id: int | None = None,
) -> tuple[list[int], SpeculativeStats]:
    """Generate up to ``max_new_tokens`` after ``prompt``; returns the tokens and the counters."""
    outputs, stats = speculative_generate_batch(
        target,
        draft,
        [prompt],
        k=k,
        max_new_tokens=max_new_tokens,
        rng=rng,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        eos_id=eos_id,
    )
    return outputs[0], stats


def speculative_generate_batch(
    target: LanguageModel,
    draft: LanguageModel,
    prompts: Sequence[Sequence[int]],
    *,
    k: int,
    max_new_tokens: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    eos_id: int | None = None,
) -> tuple[list[list[int]], SpeculativeStats]:
    """Independent speculative generations, one per prompt; counters are summed over the batch
    except the call counts, which count batched calls."""
    validate_parameters(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    if k < 0:
        raise ValueError(f"draft length k must be >= 0, got {k}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if target.vocab_size != draft.vocab_size:
        raise ValueError(
            f"target and draft must share a vocabulary ({target.vocab_size} vs {draft.vocab_size})"
        )
    sampling = _Sampling(temperature, top_k, top_p, min_p)
    contexts = [list(p) for p in prompts]
    outputs: list[list[int]] = [[] for _ in prompts]
    active = list(range(len(prompts)))
    proposed = accepted = target_calls = draft_calls = 0

    while active:
        remaining = max(max_new_tokens - len(outputs[i]) for i in active)
        # A round yields at most k_round + 1 tokens; never draft more than can be used.
        k_round = min(k, remaining - 1)
        rows = len(active)
        drafts = np.zeros((rows, k_round), dtype=np.intp)
        q = np.zeros((rows, k_round, target.vocab_size))
        for j in range(k_round):
            step_contexts = [contexts[i] + drafts[r, :j].tolist() for r, i in enumerate(active)]
            q[:, j] = sampling.probs(draft.next_logits(step_contexts))
            drafts[:, j] = draw(q[:, j], rng)
            draft_calls += 1
        # One target call scores every prefix: context, context+d1, ..., context+d1..dk.
        scored = [
            contexts[i] + drafts[r, :j].tolist()
            for r, i in enumerate(active)
            for j in range(k_round + 1)
        ]
        p = sampling.probs(target.next_logits(scored)).reshape(rows, k_round + 1, -1)
        target_calls += 1

        row_idx = np.arange(rows)[:, None]
        pos_idx = np.arange(k_round)[None, :]
        p_draft = p[row_idx, pos_idx, drafts]
        q_draft = q[row_idx, pos_idx, drafts]
        u = rng.random((rows, k_round))
        # q(x) > 0 because x was drawn from q; the ratio test is u < p/q written without division.
        ok = u * q_draft < p_draft
        # Accepted = the run of leading successes (argmin finds the first failure).
        n_accepted = (
            np.where(ok.all(axis=1), k_round, np.argmin(ok, axis=1))
            if k_round
            else np.zeros(rows, dtype=np.intp)
        )
        at = p[np.arange(rows), n_accepted]
        residual = at.copy()
        rejected = n_accepted < k_round
        if rejected.any():
            q_at = q[np.arange(rows)[rejected], n_accepted[rejected]]
            diff = np.maximum(at[rejected] - q_at, 0.0)
            mass = diff.sum(axis=1, keepdims=True)
            # Zero residual mass means p == q there, in which case rejection had probability 0;
            # fall back to p so that float rounding can never produce a division by zero.
            residual[rejected] = np.where(
                mass > 0, diff / np.where(mass > 0, mass, 1.0), at[rejected]
            )
        final = draw(residual, rng)

        proposed += rows * k_round
        accepted += int(n_accepted.sum())
        still_active: list[int] = []
        for r, i in enumerate(active):
            new = [*drafts[r, : n_accepted[r]].tolist(), int(final[r])]
            room = max_new_tokens - len(outputs[i])
            new = new[:room]
            if eos_id is not None and eos_id in new:
                new = new[: new.index(eos_id) + 1]
            outputs[i].extend(new)
            contexts[i].extend(new)
            if len(outputs[i]) < max_new_tokens and (eos_id is None or new[-1] != eos_id):
                still_active.append(i)
        active = still_active

    stats = SpeculativeStats(
        generated=sum(len(o) for o in outputs),
        proposed=proposed,
        accepted=accepted,
        target_calls=target_calls,
        draft_calls=draft_calls,
    )
    return outputs, stats
