"""The options that select recorded events, and what a command says when a selection is
empty or left rows out (`gateway audit list`, `audit export`, `gateway replay`).

    @filter_options
    def audit_export(**filters): EventFilter(**filters)
"""

from __future__ import annotations

from typing import Any

import click

from gateway.cli._render import UNTIL_HELP, parse_until, parse_when, shown
from gateway.evidence import EventKind
from gateway.policy import task_names
from gateway.settings import Settings

__all__ = [
    "experiments_left_out_line",
    "filter_options",
    "known_tasks_line",
    "selection_text",
]


def filter_options(fn: Any) -> Any:
    kinds = click.Choice([k.value for k in EventKind])
    for option in reversed(
        [
            click.option("--task", help="Only this task."),
            click.option("--caller", help="Only this calling service."),
            click.option("--kind", type=kinds, help="Only events (requests) of this kind."),
            click.option("--since", callback=parse_when, help="From this UTC time (ISO 8601)."),
            click.option("--until", callback=parse_until, help=UNTIL_HELP),
        ]
    ):
        fn = option(fn)
    return fn


def experiments_left_out_line(count: int) -> str:
    """The footer of a selection that left experiment samples out (audit list, replay)."""
    return (
        f"{count} experiment request(s) matching the filters left out (use --include-experiments)"
    )


def selection_text(filters: dict[str, Any]) -> str:
    given = {k: v for k, v in filters.items() if v not in (None, ())}
    return (" " + " ".join(f"--{k} {shown(v)}" for k, v in given.items())) if given else ""


def known_tasks_line(settings: Settings) -> str:
    """The tasks a selection could name: those of the policy folder, said when a selection
    is empty (a misspelt --task is the usual cause): named from the folder, no policy loaded."""
    tasks = task_names(settings.policy_dir)
    if not tasks:
        return f"known tasks: none found in {shown(settings.policy_dir)}"
    return f"known tasks (in {shown(settings.policy_dir)}): {', '.join(shown(t) for t in tasks)}"
