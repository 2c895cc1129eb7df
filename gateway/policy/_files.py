"""Reading one policy file and the files it names, turning every problem into a Finding.

    data, findings = read_policy_file(Path("policies/risk_report.toml"), Path("policies"))

Nothing here raises for bad content: a compliance officer gets one finding per problem.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from gateway.policy._findings import Finding, error
from gateway.policy._schema import PolicyFile

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_policy_file(path: Path, name: str) -> tuple[PolicyFile | None, list[Finding]]:
    """Parse and validate the structure of one policy file (no catalog checks here)."""
    text, problem = _read_text(path, name, "file")
    if text is None:
        return None, [problem] if problem else []
    try:
        raw = tomllib.loads(text)
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
    try:
        data = PolicyFile.model_validate(raw)
    except ValidationError as exc:
        return None, [_schema_finding(name, err) for err in exc.errors()]
    findings: list[Finding] = []
    if data.task is not None and data.task != path.stem:
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
        f"The value of {key!r} is not usable: {err['msg']} (got {err.get('input')!r}).",
        "Use the type and values docs/policies.md gives for this key.",
    )


def _read_text(path: Path, name: str, key: str) -> tuple[str | None, Finding | None]:
    try:
        # Universal newlines: a CRLF checkout hashes the same as an LF one.
        return path.read_text(encoding="utf-8"), None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, error(
            "file-unreadable",
            name,
            key,
            f"The file {path.name!r} cannot be read: {reason}.",
            "Check that it exists, is readable and is UTF-8 text.",
        )


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
    text, problem = _read_text(path, name, key)
    return text, [problem] if problem else []


def read_output_schema(
    policy_dir: Path, relative: str, name: str
) -> tuple[dict[str, Any] | None, list[Finding]]:
    key = "output.schema_file"
    path, problem = resolve_inside(policy_dir, relative, name, key)
    if path is None:
        return None, [problem] if problem else []
    text, problem = _read_text(path, name, key)
    if text is None:
        return None, [problem] if problem else []
    try:
        schema = json.loads(text)
        if not isinstance(schema, dict):
            raise ValueError("the top level must be a JSON object")
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except (ValueError, jsonschema.SchemaError) as exc:
        reason = exc.message if isinstance(exc, jsonschema.SchemaError) else str(exc)
        return None, [
            error(
                "schema-file-invalid",
                name,
                key,
                f"{relative!r} is not a valid JSON schema: {reason}.",
                "Fix the schema file; it must be a JSON object that is a valid JSON Schema.",
            )
        ]
    return schema, []
