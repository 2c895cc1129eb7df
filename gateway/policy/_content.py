"""The caller's messages, checked block by block against what the policy opens.

    clean = check_messages(messages, policy)     # InputError / PolicyViolation otherwise

Text is always accepted. Everything else is refused unless the policy opens it, and each
refusal names the policy key that governs it:

- ``tool_use`` blocks (assistant turns) and ``tool_result`` blocks (user turns) only for the
  tools in the policy's tools file (``tools.file``), or the caller's own tools where the policy
  opens them (``caller.tools``); a result must answer a call made earlier in the conversation,
  so the turns link by ``tool_use_id``;
- ``thinking`` and ``redacted_thinking`` blocks (assistant turns, passed back in a tool loop)
  only in a request whose thinking is on or may be turned on by the caller;
- ``image`` and ``document`` (PDF) blocks only under ``[input] images`` / ``documents``, with
  base64 sources within ``max_bytes`` each and ``max_count`` per request, checked here rather
  than left to an upstream 413; URL sources only where ``url = true`` (the provider fetches
  them at request time, so what the model read is not in the record); Files API sources never
  (their content is opaque to anyone holding only the request);
- ``cache_control`` on a caller's block only under ``[input] cache_control = true``, within
  the provider's four breakpoints (the policy's own count) and never a longer-lived one after
  a shorter one (the provider refuses that order).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from dataclasses import dataclass, field
from typing import Any, cast

from gateway.errors import InputError, PolicyViolation
from gateway.policy._schema import AttachmentLimits, Policy
from gateway.policy.rules.tools import is_client_tool

MIB = 1024 * 1024
# The provider's limit on one request; larger ones are refused at its edge with a 413.
MAX_REQUEST_BYTES = 32 * MIB
MAX_CACHE_BREAKPOINTS = 4
CACHE_TTLS = ("5m", "1h")
IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
DOCUMENT_MEDIA_TYPES = ("application/pdf",)
_KIND_KEY = {"image": "images", "document": "documents"}


@dataclass
class _Walk:
    """What the check has seen so far in one request."""

    policy: Policy
    tool_names: frozenset[str]
    tools_key: str = "tools.file"  # the policy key that governs the tools
    thinking: bool = False  # whether thinking blocks may be passed back
    system_turns: bool = False  # whether system messages may sit inside the conversation
    tool_use_ids: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    attachment_bytes: int = 0
    text_bytes: int = 0
    system_bytes: int = 0
    ttls: list[str] = field(default_factory=list)  # cache breakpoints in prefix order


@dataclass(frozen=True)
class CheckedMessages:
    messages: list[dict[str, Any]]
    text_bytes: int  # UTF-8 bytes of the text, tool inputs and tool results
    system_bytes: int = 0  # of that, the text of system messages inside the conversation


def policy_breakpoints(policy: Policy) -> list[str]:
    """The cache breakpoints the policy itself sets (see ``_plan._body``)."""
    ttl = policy.prompt.cache
    if ttl is None or (policy.prompt.system is None and policy.tools.definitions is None):
        return []
    return [ttl]


def check_messages(
    messages: object,
    policy: Policy,
    *,
    tool_names: frozenset[str] | None = None,
    thinking: bool = False,
    prefix: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], []),
) -> CheckedMessages:
    """``tool_names``: the caller's own tools (under ``[caller] tools``), None for the policy's;
    ``thinking``: whether the request thinks (its thinking blocks may be passed back);
    ``prefix``: the caller's own tools and system blocks, whose cache_control breakpoints
    come before the messages' (tools, then the policy's own, then the system blocks)."""
    if not isinstance(messages, list) or not messages:
        raise InputError("no messages were given.", hint="Pass a prompt or a list of messages.")
    if tool_names is None:
        names = frozenset(
            str(t["name"]) for t in policy.tools.definitions or () if is_client_tool(t)
        )
        tools_key = "tools.file"
    else:
        names, tools_key = tool_names, "caller.tools"
    thinks = thinking or policy.caller.thinking is not None
    tools, system = prefix
    # A caller that may bring its own system prompt may also place system text between
    # turns (a mid-conversation system message); it is the caller's system prompt too.
    walk = _Walk(policy, names, tools_key, thinks, "system" in policy.caller.parts())
    for block in tools:
        _cache_control(walk, block, f"tool {str(block.get('name'))[:64]!r}")
    walk.ttls += policy_breakpoints(policy)
    for block in system:
        _cache_control(walk, block, "the system prompt")
    clean: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"message {i + 1}"
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise InputError(
                f"{where} is malformed: each message needs exactly 'role' and 'content'."
            )
        role, content = message["role"], message["content"]
        if role == "system" and walk.system_turns and i > 0:
            clean.append({"role": role, "content": _system_turn(walk, content, where)})
            continue
        if role not in ("user", "assistant"):
            raise InputError(f"{where} has role {role!r}; only 'user' and 'assistant' are allowed.")
        if i == 0 and role != "user":
            raise InputError("the first message must come from the user.")
        clean.append({"role": role, "content": _content(walk, content, role, where)})
    if walk.attachment_bytes > MAX_REQUEST_BYTES:
        raise InputError(
            f"the attachments add up to about {walk.attachment_bytes // MIB:,} MiB, more than "
            f"the {MAX_REQUEST_BYTES // MIB} MiB the provider accepts in one request.",
            hint="Send fewer or smaller attachments per request.",
        )
    return CheckedMessages(clean, walk.text_bytes, walk.system_bytes)


def check_unicode(text: str, where: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Lone surrogates have no UTF-8 form, so they can be neither sent nor recorded.
        raise InputError(
            f"{where} is not valid Unicode text (an unpaired surrogate at character {exc.start}).",
            hint="Decode the input properly before sending it.",
        ) from None
    return text


def _text(walk: _Walk, text: str, where: str) -> str:
    check_unicode(text, where)
    walk.text_bytes += len(text.encode())
    return text


def _content(walk: _Walk, content: object, role: str, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        if not content.strip():
            raise InputError(f"{where} is empty.")
        return _text(walk, content, where)
    if not isinstance(content, list) or not content:
        raise InputError(f"{where} has no text: content must be a string or a list of blocks.")
    blocks = [_block(walk, block, role, where) for block in content]
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    if len(texts) == len(blocks) and not any(t.strip() for t in texts):
        raise InputError(f"{where} is empty.")
    return blocks


def _block(walk: _Walk, block: object, role: str, where: str) -> dict[str, Any]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise InputError(f"{where} has a block that is not an object with a 'type'.")
    kind = block["type"]
    if kind == "text":
        _keys(block, {"type", "text"}, where)
        if not isinstance(block["text"], str):
            raise InputError(
                f"{where} has a block that is not plain text; text blocks are "
                '{"type": "text", "text": "..."}.'
            )
        _text(walk, block["text"], where)
    elif kind in _KIND_KEY:
        _attachment(walk, block, role, where)
    elif kind == "tool_use":
        _tool_use(walk, block, role, where)
    elif kind == "tool_result":
        _tool_result(walk, block, role, where)
    elif kind in ("thinking", "redacted_thinking") and walk.thinking and role == "assistant":
        _thinking_block(walk, block, where)
    else:
        raise InputError(
            f"{where} has a {kind!r} block, which the gateway does not accept; only text, "
            "image, document, tool_use and tool_result blocks are (as far as the policy "
            "opens them)."
        )
    _cache_control(walk, block, where)
    return copy.deepcopy(block)


def _keys(block: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(block) - allowed - {"cache_control"})
    if unknown:
        raise InputError(
            f"{where} has a {block['type']!r} block with unknown key(s) "
            f"{', '.join(repr(k)[:40] for k in unknown[:5])}.",
            hint="Send blocks as the Messages API defines them; nothing unknown is passed on.",
        )


def _cache_control(walk: _Walk, block: dict[str, Any], where: str) -> None:
    if "cache_control" not in block:
        return
    policy = walk.policy
    if not policy.input.cache_control:
        raise PolicyViolation(
            f"{where} marks a block with cache_control, which the policy for task "
            f"{policy.task!r} does not let callers do ([input] cache_control).",
            key="input.cache_control",
        )
    value = block["cache_control"]
    ttl = value.get("ttl", "5m") if isinstance(value, dict) else None
    if not (
        isinstance(value, dict)
        and value.get("type") == "ephemeral"
        and set(value) <= {"type", "ttl"}
        and ttl in CACHE_TTLS
    ):
        raise InputError(
            f'{where} has a cache_control that is not {{"type": "ephemeral"}} with an '
            "optional ttl of '5m' or '1h'."
        )
    walk.ttls.append(ttl)
    if len(walk.ttls) > MAX_CACHE_BREAKPOINTS:
        raise PolicyViolation(
            f"the request sets more than {MAX_CACHE_BREAKPOINTS} cache_control breakpoints "
            f"(the policy for task {policy.task!r} sets {len(policy_breakpoints(policy))}); "
            "the provider refuses more.",
            key="input.cache_control",
        )
    if ttl == "1h" and "5m" in walk.ttls[:-1]:
        raise PolicyViolation(
            f"{where} asks for a 1h cache breakpoint after a 5m one; the provider needs "
            "longer-lived breakpoints first (the policy's own come first).",
            key="input.cache_control",
        )


# -- attachments ------------------------------------------------------------------------------


def _attachment(walk: _Walk, block: dict[str, Any], role: str, where: str) -> None:
    kind = block["type"]
    source = _attachment_shape(block, where)
    table = _KIND_KEY[kind]
    key = f"input.{table}"
    policy = walk.policy
    limits: AttachmentLimits | None = getattr(policy.input, table)
    if limits is None:
        raise PolicyViolation(
            f"{where} carries {'an' if kind == 'image' else 'a'} {kind}, which the policy for "
            f"task {policy.task!r} does not accept ([input] {table} is not set).",
            key=key,
        )
    if role != "user":
        raise InputError(f"{where} carries a {kind} in an assistant turn; only users send them.")
    walk.counts[kind] = walk.counts.get(kind, 0) + 1
    if walk.counts[kind] > limits.max_count:
        raise PolicyViolation(
            f"the request carries more than {limits.max_count} {table}, the most the policy "
            f"for task {policy.task!r} allows in one request.",
            key=f"{key}.max_count",
        )
    if source["type"] == "url":
        if not limits.url:
            raise PolicyViolation(
                f"{where} names its {kind} by URL; the provider would fetch it at request "
                "time, so what the model read would not be in the record and could change "
                f"afterwards. The policy for task {policy.task!r} does not allow URL sources.",
                key=f"{key}.url",
            )
        if not source["url"].startswith("https://"):
            raise InputError(f"{where} has a {kind} URL that is not an https:// address.")
        return
    if source["type"] != "base64":
        raise PolicyViolation(
            f"{where} has a {kind} source of type {str(source['type'])[:40]!r}; only base64 "
            "sources (and URLs where the policy allows them) can be recorded with the request.",
            key=key,
        )
    _base64_source(walk, kind, source, limits, key, where)


def _attachment_shape(block: dict[str, Any], where: str) -> dict[str, Any]:
    """The block's source, if the block is well formed; InputError otherwise."""
    kind = block["type"]
    extra = {"title", "context"} if kind == "document" else set()
    unknown = set(block) - {"type", "source", "cache_control"} - extra
    source = block.get("source")
    problem = None
    if unknown:
        problem = "it has unknown keys"
    elif any(k in block and not isinstance(block[k], str) for k in extra):
        problem = "its title and context must be text"
    elif not isinstance(source, dict) or not isinstance(source.get("type"), str):
        problem = "it needs a source object with a type"
    elif source["type"] == "base64" and not (
        set(source) == {"type", "media_type", "data"}
        and isinstance(source["media_type"], str)
        and isinstance(source["data"], str)
        and source["data"]
    ):
        problem = 'a base64 source is {"type": "base64", "media_type": ..., "data": ...}'
    elif source["type"] == "url" and not (
        set(source) == {"type", "url"} and isinstance(source["url"], str)
    ):
        problem = 'a URL source is {"type": "url", "url": "https://..."}'
    if problem is not None:
        raise InputError(
            f"{where} has a block that is not plain text nor a well-formed {kind}: {problem}."
        )
    return cast(dict[str, Any], source)


def _base64_source(
    walk: _Walk,
    kind: str,
    source: dict[str, Any],
    limits: AttachmentLimits,
    key: str,
    where: str,
) -> None:
    allowed = IMAGE_MEDIA_TYPES if kind == "image" else DOCUMENT_MEDIA_TYPES
    if source["media_type"] not in allowed:
        raise InputError(
            f"{where} has a {kind} of media type {source['media_type'][:40]!r}; accepted: "
            f"{', '.join(allowed)}."
        )
    data = source["data"]
    # Decoded size from the length, so an oversized attachment is refused before decoding.
    size = len(data) * 3 // 4 - data[-2:].count("=")
    if size > limits.max_bytes:
        raise PolicyViolation(
            f"{where} carries a {kind} of {_size(size)}, larger than the {_size(limits.max_bytes)} "
            f"the policy for task {walk.policy.task!r} allows per {kind}.",
            key=f"{key}.max_bytes",
        )
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{where} has a {kind} whose data is not valid base64.") from None
    if kind == "document" and not decoded.startswith(b"%PDF-"):
        raise InputError(f"{where} has a document that is not a PDF (no %PDF- header).")
    walk.attachment_bytes += len(data)


def _size(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n:,} bytes"


# -- tools ------------------------------------------------------------------------------------


def _tool_use(walk: _Walk, block: dict[str, Any], role: str, where: str) -> None:
    _keys(block, {"type", "id", "name", "input"}, where)
    if role != "assistant":
        raise InputError(
            f"{where} has a tool_use block in a user turn; tool calls are the model's."
        )
    tool_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(tool_id, str) or not tool_id or not isinstance(name, str):
        raise InputError(f"{where} has a tool_use block without a text 'id' and 'name'.")
    if not isinstance(arguments, dict):
        raise InputError(f"{where} has a tool_use block whose 'input' is not an object.")
    if name not in walk.tool_names:
        raise PolicyViolation(
            f"{where} has a call of tool {name[:64]!r}, which the policy for task "
            f"{walk.policy.task!r} does not declare ({_declared(walk)}).",
            key=walk.tools_key,
        )
    if tool_id in walk.tool_use_ids:
        raise InputError(f"{where} repeats the tool_use id {tool_id[:64]!r}.")
    walk.tool_use_ids.add(tool_id)
    walk.text_bytes += len(json.dumps(arguments, ensure_ascii=False).encode())


def _tool_result(walk: _Walk, block: dict[str, Any], role: str, where: str) -> None:
    _keys(block, {"type", "tool_use_id", "content", "is_error"}, where)
    if role != "user":
        raise InputError(f"{where} has a tool_result block in an assistant turn.")
    if not walk.tool_names:
        raise PolicyViolation(
            f"{where} carries a tool result, but the policy for task {walk.policy.task!r} "
            "declares no tools.",
            key=walk.tools_key,
        )
    tool_use_id = block.get("tool_use_id")
    if not isinstance(tool_use_id, str) or tool_use_id not in walk.tool_use_ids:
        raise PolicyViolation(
            f"{where} carries a tool result for {str(tool_use_id)[:64]!r}, which answers no "
            "tool call earlier in the conversation; a result must follow its call "
            "(linked by tool_use_id).",
            key=walk.tools_key,
        )
    if "is_error" in block and not isinstance(block["is_error"], bool):
        raise InputError(f"{where} has a tool_result whose 'is_error' is not true or false.")
    content = block.get("content")
    if content is None or isinstance(content, str):
        if content is not None:
            _text(walk, content, where)
        return
    if not isinstance(content, list):
        raise InputError(f"{where} has a tool_result whose content is not text or blocks.")
    for inner in content:
        kind = inner.get("type") if isinstance(inner, dict) else None
        if kind not in ("text", "image", "document"):
            raise InputError(
                f"{where} has a tool_result holding a block other than text, image or document."
            )
        _block(walk, inner, role, where)


def _system_turn(walk: _Walk, content: object, where: str) -> str | list[dict[str, Any]]:
    """A system message inside the conversation: text, or text blocks."""
    before = walk.text_bytes
    if isinstance(content, str):
        _text(walk, content, where)
    elif (
        isinstance(content, list)
        and content
        and all(isinstance(b, dict) and b.get("type") == "text" for b in content)
    ):
        content = [_block(walk, b, "system", where) for b in content]
    else:
        raise InputError(f"{where} is a system message whose content is not text.")
    walk.system_bytes += walk.text_bytes - before
    return content


def _thinking_block(walk: _Walk, block: dict[str, Any], where: str) -> None:
    """A thinking block the model wrote, passed back as the API asks in a tool loop."""
    if block["type"] == "thinking":
        _keys(block, {"type", "thinking", "signature"}, where)
        text, signature = block.get("thinking"), block.get("signature")
        if not isinstance(text, str) or not isinstance(signature, str):
            raise InputError(
                f"{where} has a thinking block without text 'thinking' and 'signature'."
            )
        _text(walk, text, where)
    else:
        _keys(block, {"type", "data"}, where)
        if not isinstance(block.get("data"), str):
            raise InputError(f"{where} has a redacted_thinking block without text 'data'.")


def _declared(walk: _Walk) -> str:
    names = sorted(walk.tool_names)
    return "declared: " + ", ".join(repr(n) for n in names) if names else "it declares none"
