"""`gateway experiment`: compare sampling configurations by diversity and length.

    $ gateway experiment --prompt "The reviewer reads the" -n 10 --plot diversity.png
    $ gateway experiment quant_strategy --prompt "FX carry" -n 5 --config warm=0.9 --format json

Every sample goes through the gateway and is audited (cache off). Configurations the task's
model cannot honour are skipped, each with the reason, on stderr (and in the JSON).
"""

from __future__ import annotations

from pathlib import Path

import click

from gateway import InputError
from gateway.cli._context import settings_of
from gateway.cli._render import Progress, echo_json
from gateway.experiment import (
    ExperimentReport,
    SamplingConfig,
    parse_config,
    plot_report,
    run_experiment,
)
from gateway.logging import configure_logging


@click.command("experiment")
@click.argument("task", default="offline_demo")
@click.option("--prompt", "prompts", multiple=True, help="A prompt to sample. Repeatable.")
@click.option(
    "--prompts-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A text file with one prompt per line (blank lines ignored).",
)
@click.option(
    "-n",
    "n",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Samples per prompt and configuration.",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="NAME=T[,top_p=P][,top_k=K]",
    help="A sampling configuration (T may be 'default'). Repeatable; "
    "default: greedy and four temperature/top_p pairs.",
)
@click.option("--offline", is_flag=True, help="Run on the local model instead of Claude.")
@click.option(
    "--unsafe-override-mandate",
    "override",
    is_flag=True,
    help="Run configurations that change the sampling values the reviewed policy mandates "
    "on Claude (recorded as a labelled experiment, apart from the task's answers).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also draw diversity and length against temperature into this PNG (needs matplotlib).",
)
@click.pass_context
def experiment_command(
    ctx: click.Context,
    task: str,
    prompts: tuple[str, ...],
    prompts_file: Path | None,
    n: int,
    configs: tuple[str, ...],
    offline: bool,
    override: bool,
    fmt: str,
    plot: Path | None,
) -> None:
    """Draw N audited samples of TASK per prompt and configuration; report their diversity."""
    configure_logging(level="WARNING")
    parsed: list[SamplingConfig] = [parse_config(text) for text in configs]
    all_prompts = list(prompts) + _read_prompts(prompts_file)
    if not all_prompts:
        raise InputError("no prompt was given.", hint="Pass --prompt TEXT or --prompts-file FILE.")
    if override:
        click.echo(
            "warning: --unsafe-override-mandate: configurations may change what the reviewed "
            "policy mandates; samples are recorded as a labelled experiment.",
            err=True,
        )
    # The total is known only once the skipped configurations are: the bar opens then.
    with Progress("sampling") as progress:
        report = run_experiment(
            settings_of(ctx),
            task,
            all_prompts,
            n,
            parsed or None,
            offline=offline,
            override_mandates=override,
            progress=progress,
        )
    if plot is not None:
        plot_report(report, plot)
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
    else:
        _print_table(report)
    for skipped in report.skipped:
        click.echo(f"skipped {skipped.config!r}: {skipped.reason}", err=True)
    if plot is not None:
        click.echo(f"plot written to {plot}", err=True)


def _read_prompts(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"the prompts file {str(path)!r} cannot be read: {exc}.") from exc
    return [line.strip() for line in text.splitlines() if line.strip()]


def _print_table(report: ExperimentReport) -> None:
    click.echo(f"task {report.task} on {report.model_id}, {report.n} samples per row")
    click.echo(
        f"{'prompt':24}  {'config':16}  {'unique':>6}  {'dist-1':>6}  {'dist-2':>6}  "
        f"{'length':>6}  {'audit seq':>13}  example"
    )
    for r in report.rows:
        prompt = r.prompt if len(r.prompt) <= 24 else r.prompt[:23] + "…"
        seqs = f"{r.first_seq}-{r.last_seq}"
        click.echo(
            f"{prompt:24}  {r.config[:16]:16}  {r.unique_ratio:6.2f}  {r.distinct_1:6.2f}  "
            f"{r.distinct_2:6.2f}  {r.avg_length:6.1f}  {seqs:>13}  {r.example}"
        )
