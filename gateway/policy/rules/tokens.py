"""Rules about max_tokens: present, within the model's limit, streamable."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.policy._findings import Finding, error, warning
from gateway.policy.rules._subject import Subject

# The SDK refuses non-streaming calls above this with its default timeout (10 minutes).
NON_STREAMING_MAX_TOKENS = 21_333
KEY = "generation.max_tokens"


def max_tokens_missing(s: Subject) -> Iterator[Finding]:
    if s.generation.max_tokens is None:
        yield error(
            "max-tokens-missing",
            s.file,
            KEY,
            "max_tokens is not set; every request needs an upper bound on the answer length.",
            "Set max_tokens in [generation], e.g. max_tokens = 2048.",
        )


def max_tokens_range(s: Subject) -> Iterator[Finding]:
    value = s.generation.max_tokens
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
    value = s.generation.max_tokens
    limited = s.model is None or s.model.non_streaming_time_limit
    if limited and value is not None and value > NON_STREAMING_MAX_TOKENS:
        yield warning(
            "max-tokens-streaming",
            s.file,
            KEY,
            f"max_tokens = {value} is above {NON_STREAMING_MAX_TOKENS:,}; such long answers can "
            "outlast the provider's non-streaming time limit.",
            f"Keep max_tokens at {NON_STREAMING_MAX_TOKENS:,} or less unless this task needs "
            "very long answers and runs with a long request timeout.",
        )


def stop_sequence_blank(s: Subject) -> Iterator[Finding]:
    for i, stop in enumerate(s.generation.stop_sequences):
        if not stop.strip():
            yield error(
                "stop-sequence-blank",
                s.file,
                f"generation.stop_sequences[{i}]",
                "A stop sequence is empty or only whitespace; the API refuses it, and it could "
                "never mark the end of an answer.",
                'Remove it, or write the text that ends an answer, e.g. "</verdict>".',
            )
