"""Checks on what a caller hands the gateway, before any policy is consulted.

    messages = messages_from_input("Transaction: ...", None)   # [{"role": "user", ...}]
    check_caller("payments-svc")

Every refusal is an InputError whose message never quotes the input itself.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InputError

MAX_CALLER_LENGTH = 200


def messages_from_input(prompt: object, messages: object) -> list[dict[str, Any]]:
    if prompt is not None and messages is not None:
        raise InputError("give either a prompt or messages, not both.")
    if messages is not None:
        if not isinstance(messages, list):
            raise InputError(
                "messages must be a list of {'role', 'content'} objects.",
                hint="Pass messages=[{'role': 'user', 'content': '...'}].",
            )
        return messages
    if not isinstance(prompt, str):
        raise InputError(
            f"the prompt must be text, not {type(prompt).__name__}.",
            hint="Pass a str, or messages=[...].",
        )
    return [{"role": "user", "content": prompt}]


def safe_label(value: object) -> str:
    """A task or caller name as it may be stored: valid UTF-8, bounded, never the raw object."""
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_CALLER_LENGTH]


def check_caller(caller: object) -> str | None:
    """The caller name as recorded, or InputError. It is an opaque service id, not a person."""
    if caller is None:
        return None
    if not isinstance(caller, str) or not caller.strip():
        raise InputError("caller must be a non-empty string naming the calling service.")
    if len(caller) > MAX_CALLER_LENGTH:
        raise InputError(f"caller is longer than {MAX_CALLER_LENGTH} characters.")
    if caller != safe_label(caller) or not caller.isprintable():
        raise InputError(
            "caller must be printable text (no control characters or invalid Unicode).",
            hint="Use a service name such as 'payments-svc'.",
        )
    return caller
