"""Sampling experiments: draw n samples per prompt x configuration through the gateway.

    report = run_experiment(Settings(policy_dir="policies"), "offline_demo",
                            ["The reviewer reads the"], n=5)
    for row in report.rows:
        print(row.config, row.unique_ratio, row.distinct_2, row.first_seq, row.last_seq)

Every sample is an ordinary gateway request: planned, written to the audit log before and after
the call, never served from the replay cache. Each configuration runs under a policy derived
from the task's reviewed one (``derive_policy``): the configuration's sampling values, cache
mode "record", not reproducible. The derived policy is what the log records, with its own
fingerprint, so an experiment sample can never pass for an answer under the reviewed policy.

A configuration the model cannot honour is never sent with the value dropped: it is skipped,
and the report says why (the same review rules that stop a policy loading). A model that
honours no sampling parameter gets only ``MODEL_DEFAULT``.

An experiment is a way around a mandate, so it is held to account: a configuration that
changes a sampling value the reviewed policy mandates, on a model that leaves the machine,
runs only with ``override_mandates=True`` (``--unsafe-override-mandate``). Every derived
policy is labelled (``experiment:<config>``): the label is part of each request's key, so an
experiment never serves nor is served from the task's replay cache, and the REQUEST records
both the reviewed and the derived fingerprint.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway._inputs import EXPERIMENT_CALLER
from gateway.catalog import Catalog, ModelInfo
from gateway.errors import ConfigurationError, InputError, PolicyLoadError, PolicyViolation
from gateway.policy import Caller, Policy, PolicySet, plan_request
from gateway.providers.registry import runs_offline
from gateway.request import Gateway, offline_policy
from gateway.sampling.processors import validate_parameters
from gateway.settings import Settings

EXAMPLE_CHARS = 60  # an example is a hint of the output, not the output


class ExperimentConfigError(ConfigurationError):
    """A ``--config`` string that does not describe a sampling configuration."""


class SamplingConfig(BaseModel):
    """One row of an experiment: a name and the sampling parameters sent in the request body.

    ``temperature=None`` means "the model's default": nothing is sent (``MODEL_DEFAULT``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=1)
    min_p: float | None = Field(default=None, gt=0.0, le=1.0)

    def body_params(self) -> dict[str, Any]:
        """The Messages-API keys to merge into a request body; unset values are left out."""
        validate_parameters(
            temperature=1.0 if self.temperature is None else self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
        )
        return {
            key: value
            for key in ("temperature", "top_p", "top_k", "min_p")
            if (value := getattr(self, key)) is not None
        }


# Issue 6 item 5's defaults for the local model. Claude models get only what they honour
# (run_experiment skips the rest, saying why); local:* honours every parameter.
DEFAULT_LOCAL_CONFIGS: tuple[SamplingConfig, ...] = (
    SamplingConfig(name="greedy", temperature=0.0),
    SamplingConfig(name="T0.3 top_p0.9", temperature=0.3, top_p=0.9),
    SamplingConfig(name="T0.7 top_p0.95", temperature=0.7, top_p=0.95),
    SamplingConfig(name="T1.0 top_p0.95", temperature=1.0, top_p=0.95),
    SamplingConfig(name="T1.2 top_p1.0", temperature=1.2, top_p=1.0),
)
MODEL_DEFAULT = SamplingConfig(name="default")


def parse_config(text: str) -> SamplingConfig:
    """``NAME=T[,top_p=P][,top_k=K][,min_p=M]``; T may be ``default`` (send no sampling value).

    parse_config("warm=0.9,top_p=0.95")  # SamplingConfig(name="warm", temperature=0.9, ...)
    """
    name, sep, rest = text.partition("=")
    usage = "Write NAME=T[,top_p=P][,top_k=K][,min_p=M], e.g. warm=0.9,top_p=0.95."
    if not sep or not name.strip() or not rest.strip():
        raise ExperimentConfigError(f"--config {text!r} is not NAME=T[,key=value...].", hint=usage)
    first, *others = [part.strip() for part in rest.split(",")]
    values: dict[str, Any] = {"name": name.strip()}
    try:
        if first != "default":
            values["temperature"] = float(first.removeprefix("temperature="))
        for part in others:
            key, eq, raw = part.partition("=")
            if not eq or key not in ("top_p", "top_k", "min_p"):
                raise ExperimentConfigError(
                    f"--config {text!r}: {part!r} is not top_p=, top_k= or min_p=.", hint=usage
                )
            values[key] = int(raw) if key == "top_k" else float(raw)
        config = SamplingConfig(**values)
        config.body_params()  # NaN and infinity pass pydantic's bounds; the sampler's do not
    except ExperimentConfigError:
        raise
    except (ValueError, ValidationError) as exc:
        if isinstance(exc, ValidationError):
            first_error = exc.errors()[0]
            where = ".".join(str(part) for part in first_error["loc"])
            reason = f"{where}: {first_error['msg'].lower()}"
        else:
            reason = str(exc)
        raise ExperimentConfigError(
            f"--config {text!r} is not usable: {reason}.", hint=usage
        ) from None
    return config


def _words(text: str) -> list[str]:
    return text.lower().split()


def diversity_metrics(samples: list[str]) -> dict[str, float | int]:
    """Diversity of n samples of one prompt under one configuration.

    unique_ratio: distinct samples / samples (exact string comparison).
    distinct_1, distinct_2: distinct word unigrams (bigrams) / all unigrams (bigrams), pooled
    over the samples (Li et al., 2016); bigrams do not cross sample boundaries. 0.0 when there
    are none. avg_length: mean words per sample. Words are lower-cased, whitespace-separated.
    """
    if not samples:
        raise ValueError("diversity needs at least one sample")
    tokenised = [_words(s) for s in samples]
    unigrams = [w for words in tokenised for w in words]
    bigrams = [pair for words in tokenised for pair in itertools.pairwise(words)]
    return {
        "samples": len(samples),
        "unique_ratio": len(set(samples)) / len(samples),
        "distinct_1": len(set(unigrams)) / len(unigrams) if unigrams else 0.0,
        "distinct_2": len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
        "avg_length": len(unigrams) / len(samples),
    }


class CellReport(BaseModel):
    """One prompt under one configuration: its diversity and where its samples are recorded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: str
    config: str
    temperature: float | None
    top_p: float | None
    top_k: int | None
    samples: int
    unique_ratio: float
    distinct_1: float
    distinct_2: float
    avg_length: float
    example: str
    first_seq: int  # the first and last RESPONSE event of the cell's samples
    last_seq: int
    request_ids: tuple[str, ...]


class SkippedConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    config: str
    reason: str


class ExperimentReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    model_id: str
    n: int
    rows: tuple[CellReport, ...]
    skipped: tuple[SkippedConfig, ...]


def derive_policy(policy: Policy, config: SamplingConfig) -> Policy:
    """The policy one configuration runs under: exactly the configuration's sampling values,
    record mode, not reproducible (an experiment wants fresh draws, which a replay-only task
    forbids), and no caller choices (an experiment sends no overrides, and a caller bound on a
    value the configuration leaves unset would have no reviewed default)."""
    generation = policy.generation.model_copy(
        update={"temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k}
    )
    return policy.derive(
        f"experiment:{config.name}",
        generation=generation,
        cache=policy.cache.model_copy(update={"mode": "record"}),
        reproducible=False,
        caller=Caller(),
        description=f"{policy.description} [sampling experiment: {config.name}]",
    )


SAMPLING_KEYS = ("temperature", "top_p", "top_k")


def mandate_changes(policy: Policy, config: SamplingConfig) -> list[str]:
    """The sampling values ``config`` sends that differ from what ``policy`` mandates (a value
    the policy leaves to the model's default counts too), as ``key: old -> new``."""
    return [
        f"{key}: {getattr(policy.generation, key)!r} -> {getattr(config, key)!r}"
        for key in SAMPLING_KEYS
        if getattr(config, key) != getattr(policy.generation, key)
    ]


def _refuse_unreviewed(
    policy: Policy, model: ModelInfo, run: Sequence[SamplingConfig], override: bool
) -> None:
    if override or runs_offline(model.provider):
        return
    for config in run:
        changed = mandate_changes(policy, config)
        if changed:
            raise PolicyViolation(
                f"configuration {config.name!r} changes what the reviewed policy of task "
                f"{policy.task!r} mandates on {model.id} ({'; '.join(changed)}), so it is not "
                "run. To run it as a labelled experiment, recorded apart from the task's "
                "answers, pass --unsafe-override-mandate (override_mandates=True).",
                key=f"generation.{changed[0].split(':')[0]}",
            )


def _skip_reason(policy: Policy, model: ModelInfo, config: SamplingConfig, prompt: str) -> str:
    if config.min_p is not None:
        return "policies have no min_p setting, so the gateway cannot send it."
    if not model.honours_sampling and config.body_params():
        return f"model {model.id!r} samples with its own defaults only."
    try:
        plan_request(derive_policy(policy, config), model, [{"role": "user", "content": prompt}])
    except PolicyLoadError as exc:
        return exc.message.split(": ", 1)[-1]
    return ""


def plan_configs(
    policy: Policy, model: ModelInfo, configs: Sequence[SamplingConfig] | None, prompt: str
) -> tuple[list[SamplingConfig], list[SkippedConfig]]:
    """Split configurations into those the model honours and those skipped, with reasons."""
    wanted = list(configs) if configs else list(DEFAULT_LOCAL_CONFIGS)
    run: list[SamplingConfig] = []
    skipped: list[SkippedConfig] = []
    for config in wanted:
        reason = _skip_reason(policy, model, config, prompt)
        if reason:
            skipped.append(SkippedConfig(config=config.name, reason=reason))
        else:
            run.append(config)
    if not model.honours_sampling and not run:
        run.append(MODEL_DEFAULT)
    return run, skipped


def run_experiment(
    settings: Settings,
    task: str,
    prompts: Sequence[str],
    n: int,
    configs: Sequence[SamplingConfig] | None = None,
    *,
    offline: bool = False,
    override_mandates: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ExperimentReport:
    """Draw ``n`` audited samples for every prompt x honoured configuration and measure them.

    ``progress(done, total)`` is called after each sample. A configuration that changes a
    mandated value on a model off the machine needs ``override_mandates`` (see the module).
    """
    if n < 1:
        raise InputError("n must be at least 1.", hint="Pass -n 5 or more to measure diversity.")
    if not prompts or not all(p.strip() for p in prompts):
        raise InputError("every prompt must have text.", hint="Pass --prompt TEXT.")
    catalog = Catalog.load(settings.catalog_override)
    base = PolicySet.load(Path(settings.policy_dir), catalog).get(task)
    base = offline_policy(base, catalog) if offline else base
    model = catalog.get(base.model.id)
    if model is None:  # review refuses such a policy; this guards an edited catalog
        raise ConfigurationError(f"model {base.model.id!r} is not in the model catalog.")
    run, skipped = plan_configs(base, model, configs, prompts[0])
    _refuse_unreviewed(base, model, run, override_mandates)
    rows: list[CellReport] = []
    total, done = len(run) * len(prompts) * n, 0
    for config in run:
        # One gateway per configuration: the transform is fixed for a gateway's lifetime.
        def transform(policy: Policy, config: SamplingConfig = config) -> Policy:
            return derive_policy(policy, config)

        with Gateway(settings, offline=offline, policy_transform=transform) as gw:
            for prompt in prompts:
                results = []
                for _ in range(n):
                    results.append(gw.complete(task, prompt, caller=EXPERIMENT_CALLER))
                    done += 1
                    if progress is not None:
                        progress(done, total)
                rows.append(_cell(prompt, config, results))
    return ExperimentReport(
        task=task, model_id=model.id, n=n, rows=tuple(rows), skipped=tuple(skipped)
    )


def _cell(prompt: str, config: SamplingConfig, results: Sequence[Any]) -> CellReport:
    texts = [r.text for r in results]
    metrics = diversity_metrics(texts)
    example = " ".join(texts[0].split())
    if len(example) > EXAMPLE_CHARS:
        example = example[: EXAMPLE_CHARS - 1] + "…"
    seqs = [r.seq for r in results]
    return CellReport(
        prompt=prompt,
        config=config.name,
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.top_k,
        samples=int(metrics["samples"]),
        unique_ratio=metrics["unique_ratio"],
        distinct_1=metrics["distinct_1"],
        distinct_2=metrics["distinct_2"],
        avg_length=metrics["avg_length"],
        example=example,
        first_seq=min(seqs),
        last_seq=max(seqs),
        request_ids=tuple(r.request_id for r in results),
    )


def plot_report(report: ExperimentReport, path: Path) -> None:
    """Diversity (unique ratio, distinct-1, distinct-2) and length against temperature, averaged
    over prompts; configurations without a temperature (the model default) are not plotted."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never open a window
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigurationError(
            "--plot needs matplotlib, which is not installed.",
            hint="Install the plot extra: pip install 'compliance-gateway[plot]'.",
        ) from None
    by_config: dict[str, list[CellReport]] = {}
    for row in report.rows:
        if row.temperature is not None:
            by_config.setdefault(row.config, []).append(row)
    points = sorted((rows[0].temperature or 0.0, rows) for rows in by_config.values() if rows)
    temps = [t for t, _ in points]

    def mean(rows: list[CellReport], key: str) -> float:
        return sum(float(getattr(r, key)) for r in rows) / len(rows)

    fig, (ax_div, ax_len) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (
        ("unique_ratio", "unique ratio"),
        ("distinct_1", "distinct-1"),
        ("distinct_2", "distinct-2"),
    ):
        ax_div.plot(temps, [mean(rows, key) for _, rows in points], marker="o", label=label)
    ax_div.set(xlabel="temperature", ylabel="diversity", ylim=(0, 1.05), title="Diversity")
    ax_div.legend()
    ax_len.plot(temps, [mean(rows, "avg_length") for _, rows in points], marker="o")
    ax_len.set(xlabel="temperature", ylabel="words per sample", title="Average length")
    fig.suptitle(f"{report.task} on {report.model_id}, n = {report.n} per prompt")
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    except OSError as exc:
        raise InputError(f"the plot cannot be written to {str(path)!r}: {exc.strerror}.") from exc
    finally:
        plt.close(fig)
