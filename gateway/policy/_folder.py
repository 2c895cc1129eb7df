"""The policy folder's layout: which files are tasks, and the routing table's names.

    task_names(Path("policies"))   # ["compliance_review", ...]: each task file's name

A task is a ``*.toml`` file of the folder named for it; ``routes.toml`` beside them is the
routing table, approved under the name :data:`ROUTES_TASK`. Reading the names loads no
policy, so a command that only names the tasks (`gateway audit list` when nothing matched)
starts without the policy engine.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROUTES_FILE", "ROUTES_TASK", "policy_files", "task_names"]

ROUTES_FILE = "routes.toml"
# The name the table is approved and signed off under; no task file can take it, since
# routes.toml is the table.
ROUTES_TASK = "routes"


def policy_files(policy_dir: Path) -> list[Path]:
    """The folder's task files, in name order (what PolicySet.load loads)."""
    return [path for path in sorted(policy_dir.glob("*.toml")) if path.name != ROUTES_FILE]


def task_names(policy_dir: Path) -> list[str]:
    """The tasks the folder holds, as PolicySet.load(...).tasks() names them (a file that
    does not load is a task still, reported by review); none for a missing folder."""
    if not policy_dir.is_dir():
        return []
    return sorted(path.stem for path in policy_files(policy_dir))
