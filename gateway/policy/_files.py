"""Reading one policy file and the files it names, turning every problem into a Finding.

    data, findings = read_policy_file(Path("policies/risk_report.toml"), Path("policies"))

Nothing here raises for bad content: a compliance officer gets one finding per problem.
A policy folder is input too, so every read is bounded: a file larger than its kind ever
needs is not read, and a policy or schema nested deeper than any real one is refused before
anything walks it, each as that one file's finding while the other tasks still load.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from gateway._output_check import JSONLimitError, load_json, schema_loops
from gateway.policy._content_form import loaded_only_keys
from gateway.policy._findings import Finding, error
from gateway.policy._schema import Policy
from gateway.policy.rules.patterns import schema_pattern_unsafe

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")

KIB = 1024
MAX_POLICY_CHARS = 256 * KIB  # a policy file is a few hundred bytes
MAX_PROMPT_CHARS = 4 * KIB * KIB  # more than any model's context window holds
MAX_SCHEMA_CHARS = 1 * KIB * KIB
# A policy nests three levels ([caller] max_tokens = {min, max}); a JSON schema a few per
# level of the answer. Both limits sit far above that and far below Python's recursion limit.
MAX_POLICY_DEPTH = 16
MAX_SCHEMA_DEPTH = 64
_SHOWN_INPUT = 80  # how much of a refused value a finding quotes
# tomllib takes time quadratic in the parts of one dotted key (a.b.c...), so keys are
# counted first: a line's dots outside strings and comments bound its key's parts.
MAX_KEY_PARTS = 32
MAX_TASK_CHARS = 200  # the longest task name the audit log records (its task column)
_TOML_STRING = re.compile(r""""[^"\\\n]*(?:\\.[^"\\\n]*)*"?|'[^'\n]*'?""")


def read_policy_file(path: Path, name: str) -> tuple[Policy | None, list[Finding]]:
    """Parse and validate the structure of one policy file (no catalog checks here): the
    policy as written, its named files not read yet and its task not set yet."""
    if len(path.stem) > MAX_TASK_CHARS:
        return None, [
            error(
                "task-name-too-long",
                name,
                "file",
                f"The file name makes a task name of {len(path.stem)} characters; the audit log "
                f"records at most {MAX_TASK_CHARS}, so no request to it could be recorded.",
                f"Rename the file to a shorter task name (at most {MAX_TASK_CHARS} characters).",
            )
        ]
    if not path.resolve().is_relative_to(path.parent.resolve()):
        return None, [
            error(
                "file-outside-folder",
                name,
                "file",
                f"{name!r} is a link to a file outside the policy folder, so it is not part "
                "of the reviewed policy set.",
                "Copy the policy into the folder instead of linking to it.",
            )
        ]
    text, problem = _read_text(path, name, "file", MAX_POLICY_CHARS)
    if text is None:
        return None, [problem] if problem else []
    if _longest_key(text) > MAX_KEY_PARTS:
        return None, [_too_deep(name, "file", path.name, MAX_KEY_PARTS)]
    try:
        raw = tomllib.loads(text)
    except RecursionError:
        # tomllib recurses once per nested array or inline table and has no limit of its own.
        return None, [_too_deep(name, "file", path.name, MAX_POLICY_DEPTH)]
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POSITION.search(str(exc))
        where = f"line {match[1]}, column {match[2]}" if match else "file"
        reason = _TOML_POSITION.sub("", str(exc)).strip()
        return None, [
            error(
                "toml-syntax",
                name,
                where,
                f"The file is not valid TOML at {where}: {reason}.",
                "Fix the syntax there; 'key = value' pairs, strings in double quotes.",
            )
        ]
    if _depth(raw, MAX_POLICY_DEPTH) > MAX_POLICY_DEPTH:
        return None, [_too_deep(name, "file", path.name, MAX_POLICY_DEPTH)]
    # What the loader resolves is not the file's to say (the text of its prompt file, say).
    resolved = [
        {"type": "extra_forbidden", "loc": k.split(".")} for k in loaded_only_keys(Policy, raw)
    ]
    if resolved:
        return None, [_schema_finding(name, err) for err in resolved]
    try:
        data = Policy.model_validate(raw)
    except ValidationError as exc:
        return None, [_schema_finding(name, err) for err in exc.errors()]
    findings: list[Finding] = []
    if "task" in raw and data.task != path.stem:
        findings.append(
            error(
                "task-name-mismatch",
                name,
                "task",
                f"The file declares task {data.task!r} but the task name is the file name, "
                f"{path.stem!r}.",
                f"Rename the file to {data.task}.toml or set task = {path.stem!r}.",
            )
        )
    return data, findings


def _schema_finding(name: str, err: Any) -> Finding:
    key = ".".join(str(p) for p in err["loc"]) or "file"
    kind = err["type"]
    if kind == "extra_forbidden":
        return error(
            "unknown-key",
            name,
            key,
            f"{key!r} is not a policy setting; an unknown key could be a typo that silently "
            "changes nothing.",
            "Check the spelling against docs/policies.md or remove the key.",
        )
    if kind == "missing":
        return error(
            "missing-key",
            name,
            key,
            f"The required setting {key!r} is missing.",
            "Add it; docs/policies.md lists every required key.",
        )
    return error(
        "invalid-value",
        name,
        key,
        f"The value of {key!r} is not usable: {err['msg']} (got {_shown_input(err)}).",
        "Use the type and values docs/policies.md gives for this key.",
    )


def _shown_input(err: Any) -> str:
    shown = repr(err.get("input"))  # the value is bounded in depth: repr cannot recurse far
    return shown if len(shown) <= _SHOWN_INPUT else shown[:_SHOWN_INPUT] + "..."


def _longest_key(text: str) -> int:
    """At least the parts of the longest dotted key in ``text``, counted line by line."""
    if text.count(".") <= MAX_KEY_PARTS:
        return 0
    longest = 0
    for line in text.splitlines():
        if line.count(".") > MAX_KEY_PARTS:
            code = _TOML_STRING.sub("", line).partition("#")[0]
            longest = max(longest, code.count(".") + 1)
    return longest


def _depth(value: object, limit: int) -> int:
    """How deeply ``value`` nests lists and dicts, counted up to ``limit + 1``; no recursion."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        if isinstance(current, dict):
            children: Any = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        pending.extend((child, depth + 1) for child in children)
    return deepest


def _too_deep(name: str, key: str, shown: str, limit: int) -> Finding:
    return error(
        "nesting-too-deep",
        name,
        key,
        f"{shown!r} nests its values more than {limit} levels deep, far deeper than any "
        "policy or schema needs, so it is not read.",
        "Flatten the structure; docs/policies.md shows the shape each setting takes.",
    )


def _read_text(
    path: Path, name: str, key: str, max_chars: int
) -> tuple[str | None, Finding | None]:
    try:
        # Opened without blocking and checked to be a regular file before it is read: a FIFO
        # (or a device) named as a prompt would otherwise hang the load, or `policy review`,
        # until someone writes to it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None, error(
                "file-unreadable",
                name,
                key,
                f"{path.name!r} is not a regular file (a pipe, a device or a socket), so it "
                "is not read.",
                "Name a text file inside the policy folder.",
            )
        # Universal newlines: a CRLF checkout hashes the same as an LF one.
        with open(fd, encoding="utf-8") as fh:
            text = fh.read(max_chars + 1)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, error(
            "file-unreadable",
            name,
            key,
            f"The file {path.name!r} cannot be read: {reason}.",
            "Check that it exists, is readable and is UTF-8 text.",
        )
    if len(text) > max_chars:
        return None, error(
            "file-unreadable",
            name,
            key,
            f"The file {path.name!r} is larger than {max_chars // KIB:,} KiB, far more than "
            "such a file needs, so it is not read.",
            "Check that the right file is named; shorten it if it really is that long.",
        )
    return text, None


def resolve_inside(
    policy_dir: Path, relative: str, name: str, key: str
) -> tuple[Path | None, Finding | None]:
    """A path named in a policy, refused if it leaves the policy folder (the reviewed set)."""
    root = policy_dir.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        return None, error(
            "file-outside-folder",
            name,
            key,
            f"{relative!r} points outside the policy folder, so it is not part of the reviewed "
            "policy set.",
            "Keep prompts and schemas inside the policy folder (prompts/, schemas/).",
        )
    return target, None


def read_system_prompt(
    policy_dir: Path, relative: str, name: str
) -> tuple[str | None, list[Finding]]:
    key = "prompt.system_file"
    path, problem = resolve_inside(policy_dir, relative, name, key)
    if path is None:
        return None, [problem] if problem else []
    text, problem = _read_text(path, name, key, MAX_PROMPT_CHARS)
    return text, [problem] if problem else []


def _read_json_file(
    policy_dir: Path, relative: str, name: str, key: str, invalid: Callable[[str], Finding]
) -> tuple[bool, Any, list[Finding]]:
    """A JSON file inside the policy folder, read with the schema files' size and depth
    bounds: whether it was read, its value, and the findings that say why it was not
    (``invalid`` words a file that is not JSON)."""
    path, problem = resolve_inside(policy_dir, relative, name, key)
    if path is None:
        return False, None, [problem] if problem else []
    text, problem = _read_text(path, name, key, MAX_SCHEMA_CHARS)
    if text is None:
        return False, None, [problem] if problem else []
    try:
        return True, load_json(text, max_depth=MAX_SCHEMA_DEPTH, max_chars=MAX_SCHEMA_CHARS), []
    except JSONLimitError:
        return False, None, [_too_deep(name, key, relative, MAX_SCHEMA_DEPTH)]
    except ValueError as exc:
        return False, None, [invalid(str(exc))]


def read_output_schema(
    policy_dir: Path, relative: str, name: str
) -> tuple[dict[str, Any] | None, list[Finding]]:
    key = "output.schema_file"
    read, schema, found = _read_json_file(
        policy_dir, relative, name, key, lambda why: _invalid_schema(name, key, relative, why)
    )
    if not read:
        return None, found
    try:
        if not isinstance(schema, dict):
            raise ValueError("the top level must be a JSON object")
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except (ValueError, jsonschema.SchemaError) as exc:
        reason = exc.message if isinstance(exc, jsonschema.SchemaError) else str(exc)
        return None, [_invalid_schema(name, key, relative, reason)]
    probes: tuple[object, ...] = (None, {}, [], "")
    if any(schema_loops(schema, probe) for probe in probes):
        return None, [_invalid_schema(name, key, relative, "its $ref references loop")]
    unsafe = list(schema_pattern_unsafe(schema, name))
    return (None, unsafe) if unsafe else (schema, [])


# A client tool as the Messages API takes it; cache_control is the policy's to set
# ([prompt] cache), never the file's.
_CLIENT_TOOL_KEYS = frozenset({"type", "name", "description", "input_schema", "strict"})
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# Provider-defined tools name a versioned type ("web_search_20250305").
_TOOL_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_TOOLS = 128


def read_tools(
    policy_dir: Path, relative: str, name: str
) -> tuple[list[dict[str, Any]] | None, list[Finding]]:
    """The tool definitions file: a JSON array of tools exactly as they are sent."""
    key = "tools.file"
    read, tools, found = _read_json_file(
        policy_dir, relative, name, key, lambda why: _invalid_tools(name, relative, why)
    )
    if not read:
        return None, found
    if not isinstance(tools, list) or not tools or len(tools) > MAX_TOOLS:
        shape = f"the top level must be a JSON array of 1 to {MAX_TOOLS} tool objects"
        return None, [_invalid_tools(name, relative, shape)]
    findings: list[Finding] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        reason = _tool_problem(tool, seen)
        if reason is not None:
            findings.append(_invalid_tools(name, relative, f"tool {i + 1}: {reason}"))
            continue
        schema = tool.get("input_schema")
        if schema is None:
            continue
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            findings.append(
                error(
                    "tool-schema-invalid",
                    name,
                    key,
                    f"The input_schema of tool {tool['name']!r} in {relative!r} is not a valid "
                    f"JSON Schema: {exc.message}.",
                    "Fix the tool's input_schema; the model is told to produce input that "
                    "matches it.",
                )
            )
    return (None, findings) if findings else (tools, [])


def _tool_problem(tool: object, seen: set[str]) -> str | None:
    if not isinstance(tool, dict):
        return "it is not a JSON object"
    tool_name = tool.get("name")
    if not isinstance(tool_name, str) or not _TOOL_NAME.fullmatch(tool_name):
        return "'name' must be 1 to 64 letters, digits, '_' or '-'"
    if tool_name in seen:
        return f"the name {tool_name!r} is used twice"
    seen.add(tool_name)
    if "cache_control" in tool:
        return "cache_control is set by the policy ([prompt] cache), not in the tools file"
    kind = tool.get("type", "custom")
    if not isinstance(kind, str) or not _TOOL_TYPE.fullmatch(kind):
        return "'type' must be 'custom' or a provider tool's versioned type"
    if kind != "custom":
        # A provider-defined tool: its fields are the provider's; review allow-lists the type.
        return None
    unknown = sorted(set(tool) - _CLIENT_TOOL_KEYS)
    if unknown:
        return f"unknown key(s) {', '.join(map(repr, unknown))}"
    if not isinstance(tool.get("input_schema"), dict):
        return "'input_schema' (a JSON Schema object) is required"
    if "description" in tool and not isinstance(tool["description"], str):
        return "'description' must be text"
    if "strict" in tool and not isinstance(tool["strict"], bool):
        return "'strict' must be true or false"
    return None


def _invalid_tools(name: str, relative: str, reason: str) -> Finding:
    return error(
        "tools-file-invalid",
        name,
        "tools.file",
        f"{relative!r} is not a usable tools file: {reason}.",
        "The tools file is a JSON array of tools as the Messages API takes them: name, "
        "description, input_schema (and strict), or a provider tool's type and name.",
    )


def _invalid_schema(name: str, key: str, relative: str, reason: str) -> Finding:
    return error(
        "schema-file-invalid",
        name,
        key,
        f"{relative!r} is not a valid JSON schema: {reason}.",
        "Fix the schema file; it must be a JSON object that is a valid JSON Schema.",
    )
