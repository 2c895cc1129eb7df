"""Rules about max_tokens: present, within the model's limit, streamable."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error, warning
from gateway.policy.rules._subject import Rule, Subject

KEY = "generation.max_tokens"


def max_tokens_missing(s: Subject) -> Iterator[Finding]:
    if s.policy.generation.max_tokens is None:
        yield error(
            "max-tokens-missing",
            s.file,
            KEY,
            "max_tokens is not set; every request needs an upper bound on the answer length.",
            "Set max_tokens in [generation], e.g. max_tokens = 2048.",
        )


def max_tokens_range(s: Subject) -> Iterator[Finding]:
    value = s.policy.generation.max_tokens
    if value is None:
        return
    if value < 1:
        yield error(
            "max-tokens-range",
            s.file,
            KEY,
            f"max_tokens = {value} is below 1.",
            "Set max_tokens to a positive number.",
        )
    elif s.model is not None and value > s.model.max_output_tokens:
        yield error(
            "max-tokens-range",
            s.file,
            KEY,
            f"max_tokens = {value} is above the {s.model.max_output_tokens} tokens "
            f"{s.model_id!r} can produce.",
            f"Set max_tokens to {s.model.max_output_tokens} or less.",
        )


def max_tokens_streaming(s: Subject) -> Iterator[Finding]:
    """A max_tokens above the model's non-streaming limit (the catalog's, checked against the
    SDK's own rule): an error for a task that never streams, a warning for one that may (its
    non-streamed calls can outlast the limit), nothing for one that must stream."""
    value = s.policy.generation.max_tokens
    model = s.model
    if model is None or not model.non_streaming_time_limit or s.policy.output.stream == "must":
        return
    limit = model.non_streaming_max_tokens
    if value is None or limit is None or value <= limit:
        return
    if s.policy.output.stream == "never":
        yield error(
            "max-tokens-streaming",
            s.file,
            KEY,
            f"max_tokens = {value} is above the {limit:,} tokens {s.model_id!r} may be asked "
            "for without streaming, and this task never streams, so its long answers cannot "
            "be delivered.",
            f'Set stream = "must" (or "may") in [output], or max_tokens to {limit:,} or less.',
        )
        return
    yield warning(
        "max-tokens-streaming",
        s.file,
        KEY,
        f"max_tokens = {value} is above the {limit:,} tokens {s.model_id!r} may be asked for "
        "without streaming; such long answers can outlast the provider's non-streaming time "
        "limit when a caller does not stream.",
        f'Set stream = "must" in [output] so every call streams, or keep max_tokens at '
        f"{limit:,} or less.",
    )


def stop_sequence_blank(s: Subject) -> Iterator[Finding]:
    for i, stop in enumerate(s.policy.generation.stop_sequences):
        if not stop.strip():
            yield error(
                "stop-sequence-blank",
                s.file,
                f"generation.stop_sequences[{i}]",
                "A stop sequence is empty or only whitespace; the API refuses it, and it could "
                "never mark the end of an answer.",
                'Remove it, or write the text that ends an answer, e.g. "</verdict>".',
            )


# This module's rules, in the order their findings are reported.
RULES: tuple[Rule, ...] = (
    max_tokens_missing,
    max_tokens_range,
    max_tokens_streaming,
    stop_sequence_blank,
)
