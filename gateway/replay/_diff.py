"""Compare a recorded answer with a replayed one: unified text diff, JSON field changes,
and a similarity figure.

    compare_text("a\\nb\\n", "a\\nc\\n")     # TextComparison(identical=False, similarity=0.75, ...)
    json_changes({"a": 1}, {"a": 2})       # (FieldChange(path="$.a", change="changed", ...),)
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from gateway.replay._model import FieldChange

# SequenceMatcher is quadratic in the worst case; beyond this many characters the quick
# upper-bound ratio is reported instead, so a huge answer cannot stall a run.
EXACT_RATIO_LIMIT = 50_000


@dataclass(frozen=True)
class TextComparison:
    identical: bool
    similarity: float
    diff: str | None


def compare_text(recorded: str, replayed: str) -> TextComparison:
    if recorded == replayed:
        return TextComparison(identical=True, similarity=1.0, diff=None)
    matcher = difflib.SequenceMatcher(None, recorded, replayed, autojunk=False)
    long = len(recorded) + len(replayed) > EXACT_RATIO_LIMIT
    ratio = matcher.quick_ratio() if long else matcher.ratio()
    lines = difflib.unified_diff(
        recorded.splitlines(keepends=True),
        replayed.splitlines(keepends=True),
        fromfile="recorded",
        tofile="replayed",
    )
    # A last line without a newline would run into the next header; end every line.
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return TextComparison(identical=False, similarity=round(ratio, 4), diff=diff)


def json_changes(recorded: Any, replayed: Any, path: str = "$") -> tuple[FieldChange, ...]:
    """Every leaf-level difference between two JSON values, in a stable order."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        changes: list[FieldChange] = []
        for key in sorted(set(recorded) | set(replayed)):
            where = f"{path}.{key}" if _plain(key) else f"{path}[{json.dumps(key)}]"
            if key not in replayed:
                changes.append(FieldChange(path=where, change="removed", recorded=recorded[key]))
            elif key not in recorded:
                changes.append(FieldChange(path=where, change="added", replayed=replayed[key]))
            else:
                changes.extend(json_changes(recorded[key], replayed[key], where))
        return tuple(changes)
    if isinstance(recorded, list) and isinstance(replayed, list):
        changes = []
        for i in range(max(len(recorded), len(replayed))):
            where = f"{path}[{i}]"
            if i >= len(replayed):
                changes.append(FieldChange(path=where, change="removed", recorded=recorded[i]))
            elif i >= len(recorded):
                changes.append(FieldChange(path=where, change="added", replayed=replayed[i]))
            else:
                changes.extend(json_changes(recorded[i], replayed[i], where))
        return tuple(changes)
    if _same(recorded, replayed):
        return ()
    return (FieldChange(path=path, change="changed", recorded=recorded, replayed=replayed),)


def _same(a: Any, b: Any) -> bool:
    # JSON has one number type: 1 and 1.0 are the same value, but true is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _plain(key: str) -> bool:
    return key.isidentifier()
