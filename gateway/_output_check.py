"""What the gateway reads out of a model's answer: its text, and for JSON tasks the checked value.

check = check_json_output(response_text(response), schema)
check.ok, check.value, check.problem        # problem never quotes the output itself
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema


def response_text(response: Mapping[str, Any]) -> str:
    blocks = response.get("content") or []
    return "".join(
        block.get("text", "")
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


@dataclass(frozen=True)
class OutputCheck:
    ok: bool
    value: Any = None
    problem: str | None = None

    def record(self) -> dict[str, Any]:
        return {"checked": True, "ok": self.ok, "problem": self.problem}


def check_json_output(text: str, schema: Mapping[str, Any] | None) -> OutputCheck:
    """Parse and validate a JSON answer. The problem never quotes the output itself."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return OutputCheck(
            ok=False, problem=f"the output is not valid JSON (line {exc.lineno} column {exc.colno})"
        )
    except ValueError:  # NaN or Infinity: JSON has no such numbers
        return OutputCheck(ok=False, problem="the output is not valid JSON (NaN or Infinity)")
    if schema is not None:
        validator = jsonschema.Draft202012Validator(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            return OutputCheck(
                ok=False,
                problem=f"the output breaks the schema at {error.json_path} ({error.validator})",
            )
    return OutputCheck(ok=True, value=value)
