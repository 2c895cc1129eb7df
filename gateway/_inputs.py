"""Checks on what a caller hands the gateway, before any policy is consulted.

    messages = messages_from_input("Transaction: ...", None)   # [{"role": "user", ...}]
    check_caller("payments-svc")
    check_overrides({"temperature": 0.2})

Every refusal is an InputError whose message never quotes the input itself. Nested input is
bounded before anything walks it recursively (repr, canonical JSON, hashing): a value nested
deeper than MAX_INPUT_DEPTH, or with more than MAX_INPUT_ITEMS containers and values, is
refused as it is found, without recursion.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audit.canonical import shallow_enough
from gateway.errors import InputError

MAX_CALLER_LENGTH = 200
# The caller name the experiment runner records its samples under. `audit list` and replay
# leave it out by default, so it is reserved: an ordinary caller (a service, a server key, a
# default caller) under this name would hide its requests from the auditor's listing.
EXPERIMENT_CALLER = "gateway-experiment"
# Messages are a list of {role, content} with content a string or a list of text blocks:
# four levels. The limits leave room for what is legitimate and stop what is not.
MAX_INPUT_DEPTH = 16
MAX_INPUT_ITEMS = 100_000


def messages_from_input(prompt: object, messages: object) -> list[dict[str, Any]]:
    if prompt is not None and messages is not None:
        raise InputError("give either a prompt or messages, not both.")
    if messages is not None:
        if not isinstance(messages, list):
            raise InputError(
                "messages must be a list of {'role', 'content'} objects.",
                hint="Pass messages=[{'role': 'user', 'content': '...'}].",
            )
        check_bounded(messages, "messages")
        return messages
    if not isinstance(prompt, str):
        raise InputError(
            f"the prompt must be text, not {type(prompt).__name__}.",
            hint="Pass a str, or messages=[...].",
        )
    return [{"role": "user", "content": prompt}]


def check_overrides(overrides: object) -> Mapping[str, object] | None:
    """The caller's overrides, checked to be a flat-enough mapping, or InputError."""
    if overrides is None:
        return None
    if not isinstance(overrides, Mapping):
        raise InputError("overrides must be a mapping of parameter name to value.")
    check_bounded(overrides, "overrides")
    return overrides


def check_bounded(value: object, what: str) -> None:
    """Refuse ``value`` if it nests deeper than MAX_INPUT_DEPTH or holds too many items.

    Iterative, so a value nested a million deep is refused without a RecursionError; a
    container that holds itself counts as too deep.
    """
    # Most values are shown within both bounds in C: every value takes at least one byte of
    # its compact JSON, and a container with children sits above MAX_INPUT_DEPTH.
    if shallow_enough(value, MAX_INPUT_DEPTH - 1, MAX_INPUT_ITEMS):
        return
    pending: list[tuple[object, int]] = [(value, 1)]
    items = 0
    while pending:
        current, depth = pending.pop()
        items += 1
        if items > MAX_INPUT_ITEMS:
            raise _too_many(what)
        # dict first: a type check in C, where Mapping is a slower ABC check.
        if isinstance(current, dict) or isinstance(current, Mapping):  # noqa: SIM101
            children: Any = list(current.values())
        elif type(current) is list or isinstance(current, list | tuple):
            children = current
        else:
            continue
        if depth >= MAX_INPUT_DEPTH and children:
            raise InputError(
                f"{what} are nested more than {MAX_INPUT_DEPTH} levels deep.",
                hint="Messages are a list of {'role', 'content'} objects whose content is text "
                "or a list of text blocks; overrides are parameter names with plain values.",
            )
        # Strings (most of a request) are counted here rather than pushed and popped.
        inner = depth + 1
        nested = [(child, inner) for child in children if type(child) is not str]
        items += len(children) - len(nested)
        if items > MAX_INPUT_ITEMS:
            raise _too_many(what)
        pending.extend(nested)


def _too_many(what: str) -> InputError:
    return InputError(
        f"{what} hold more than {MAX_INPUT_ITEMS:,} values.", hint="Send less in one request."
    )


def _escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def safe_label(value: object) -> str:
    """A task or caller name as it may be stored and shown: printable, bounded, escaped.

    Every character ``str.isprintable`` refuses (NUL and other controls, zero-width and bidi
    characters, lone surrogates, separators other than the space) is written as a visible
    escape such as ``\\x00``, so any database accepts the text and no terminal acts on it.
    """
    text = value if isinstance(value, str) else _bounded_repr(value)
    text = text[: MAX_CALLER_LENGTH * 2]  # enough to show; escaping only makes it longer
    if not text.isprintable():
        text = "".join(c if c.isprintable() else _escaped(c) for c in text)
    return text[:MAX_CALLER_LENGTH]


def _bounded_repr(value: object) -> str:
    try:
        check_bounded(value, "the value")
        return repr(value)
    except (InputError, RecursionError, ValueError):  # ValueError: int too long to show
        return f"<{type(value).__name__}>"


def check_caller(caller: object, *, experiment: bool = False) -> str | None:
    """The caller name as recorded, or InputError. It is an opaque service id, not a person.

    ``experiment``: the call comes from a gateway that derives its policies (the experiment
    runner), the only one that may record under :data:`EXPERIMENT_CALLER`.
    """
    name = check_name(caller, "caller", example="payments-svc")
    if name == EXPERIMENT_CALLER and not experiment:
        raise InputError(
            f"caller {EXPERIMENT_CALLER!r} is reserved for `gateway experiment` samples, which "
            "audit list and replay leave out by default.",
            hint="Name the service itself, such as 'payments-svc'.",
        )
    return name


def check_name(value: object, what: str, *, example: str) -> str | None:
    """A caller or task name: plain printable text without surrounding whitespace."""
    if value is None:
        return None
    hint = f"Use a plain name such as {example!r}."
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{what} must be a non-empty string.", hint=hint)
    if len(value) > MAX_CALLER_LENGTH:
        raise InputError(f"{what} is longer than {MAX_CALLER_LENGTH} characters.", hint=hint)
    if value != value.strip():
        raise InputError(f"{what} starts or ends with whitespace.", hint=hint)
    bad = next((i for i, c in enumerate(value) if not c.isprintable()), None)
    if bad is not None:
        code = ord(value[bad])
        raise InputError(
            f"{what} contains a control or invisible character (U+{code:04X} at position "
            f"{bad + 1}); such characters can hide or fake text where the name is shown.",
            hint=hint,
        )
    return value


def read_text_file(path: Path, what: str) -> str:
    """A file the caller named (a checkpoint, a receipt, a state file), as UTF-8 text, or an
    InputError naming ``what`` it was and why it could not be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise InputError(f"cannot read the {what} {str(path)!r}: {reason}.") from None


def key_seed(text: str, what: str, *, hint: str) -> bytes:
    """An Ed25519 seed given as 64 hex characters, or as a file holding them; ``what`` names
    the key in the one-line error (e.g. "the witness key")."""
    value = text.strip()
    path = Path(value)
    if len(value) != 64 and path.is_file():
        value = path.read_text(encoding="utf-8").strip()
    try:
        seed = bytes.fromhex(value)
    except ValueError:
        seed = b""
    if len(seed) != 32:
        raise InputError(
            f"{what} is not 64 hex characters (32 random bytes), nor a file holding them.",
            hint=hint,
        )
    return seed
