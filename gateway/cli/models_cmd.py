"""`gateway models`: the model capability catalog.

$ gateway models list
$ gateway models list --format json
$ gateway models sync -o models.override.toml     # exit 1: the API differs; review the file

`sync` exits 0 when models.list agrees with the catalog (nothing is written), 1 when it
differs (the override file is written), 2 on usage or configuration errors (no key), 3 when
the API call fails.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from gateway.catalog import Catalog, sync
from gateway.catalog.sync import SyncReport
from gateway.cli._boundary import CheckFailed
from gateway.cli._context import settings_of
from gateway.cli._render import echo_json, shown, text_table
from gateway.errors import ConfigurationError

DEFAULT_OVERRIDE = Path("models.override.toml")


@click.group("models")
def models_group() -> None:
    """The model capability catalog."""


@models_group.command("list")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.pass_context
def list_command(ctx: click.Context, fmt: str) -> None:
    """List every model the gateway knows and what it honours."""
    catalog = Catalog.load(settings_of(ctx).catalog_override)
    if fmt == "json":
        echo_json([m.model_dump(mode="json") for m in catalog])
        return
    headers = [
        "ID",
        "PINNED",
        "API",
        "SAMPLING",
        "TOP_K",
        "THINKING",
        "EFFORT",
        "JSON",
        "MAX OUT",
        "CONTEXT",
        "LIFECYCLE",
        "RETIRES",
    ]
    rows = [
        [
            m.id if m.alias_of is None else f"{m.id} -> {m.alias_of}",
            "yes" if m.pinned else "ALIAS",
            m.api_version,
            m.sampling,
            "yes" if m.top_k else "no",
            ",".join(m.thinking_types) or "-",
            ",".join(m.effort_levels) or "-",
            "yes" if m.structured_outputs else "no",
            m.max_output_tokens,
            m.context_window,
            m.lifecycle,
            m.retires_at.isoformat() if m.retires_at else "-",
        ]
        for m in catalog
    ]
    click.echo(text_table(headers, rows))
    today = datetime.now(UTC).date()
    passed = [
        m
        for m in catalog
        if m.alias_of is None and m.retires_at is not None and m.retires_at <= today
        and m.lifecycle != "retired"
    ]  # fmt: skip
    if passed:
        click.echo("")
        click.echo(
            f"The catalog may be stale: a retirement date in it has passed (today is "
            f"{today.isoformat()}), yet it does not say retired:"
        )
        for m in passed:
            click.echo(
                f"  {shown(m.id)}: retired on {m.retires_at.isoformat() if m.retires_at else '-'}"
                f" (catalog: {shown(m.lifecycle)})"
            )
        click.echo(
            "Policies on these models do not load (model-retired). Refresh the catalog with "
            "'gateway models sync' and review the override."
        )


@models_group.command("sync")
@click.option(
    "-o",
    "--output",
    default=str(DEFAULT_OVERRIDE),
    show_default=True,
    metavar="FILE",
    help="Where to write the override file ('-': stdout, the summary then goes to stderr).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.pass_context
def sync_command(ctx: click.Context, output: str, fmt: str) -> None:
    """Compare the catalog with models.list and write what differs as an override file.

    Only API-derived facts are refreshed (lifecycle, retirement, limits, thinking types, effort
    levels, structured outputs); sampling facts stay curated. New models get sampling "none".
    An existing override (GATEWAY_CATALOG_OVERRIDE, else the output file) is the baseline and
    its entries are kept.
    """
    settings = settings_of(ctx)
    key = settings.anthropic_api_key
    if key is None or not key.get_secret_value():
        raise ConfigurationError(
            "no Anthropic API key is set, so models.list cannot be called.",
            hint="Set ANTHROPIC_API_KEY to a key of the organisation.",
        )
    target = None if output == "-" else Path(output)
    previous = settings.catalog_override
    if previous is None and target is not None and target.exists():
        previous = target  # a re-run keeps what a person curated in the file
    catalog = Catalog.load(previous)
    carried = sync.read_override(previous) if previous is not None else None
    client = sync.build_client(api_key=key.get_secret_value(), base_url=settings.anthropic_base_url)
    try:
        listed = sync.fetch_models(client, api_key=key.get_secret_value())
    finally:
        client.close()
    report = sync.compare(catalog, listed, on=datetime.now(UTC).date(), carried=carried)
    written: str | None = None
    if report.changed:
        text = sync.render_override(report)
        if target is None:
            click.echo(text, nl=False)
            written = "-"
        else:
            _write_checked(target, text)
            written = str(target)
    summary_to_stderr = target is None
    if fmt == "json":
        echo_json(_as_json(report, written), err=summary_to_stderr)
    else:
        for line in _summary(report, written):
            click.echo(shown(line), err=summary_to_stderr)
    if report.changed:
        raise CheckFailed()


def _write_checked(target: Path, text: str) -> None:
    """Write atomically, and only a file the catalog loader accepts."""
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=".models-sync-", suffix=".toml", dir=folder)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the override file {str(target)!r}: {exc.strerror}.",
            hint="Choose a writable path with -o.",
        ) from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        Catalog.load(tmp)  # raises CatalogError: a sync must never write a file that breaks
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _summary(report: SyncReport, written: str | None) -> list[str]:
    on = report.checked_on.isoformat()
    if not report.changed:
        lines = [f"models.list on {on}: {report.listed} models listed; the catalog is current."]
    else:
        lines = [
            f"models.list on {on}: {report.listed} models listed; "
            f"{len(report.models)} differ from the catalog."
        ]
    for change in report.models:
        if change.new:
            facts = ", ".join(
                f"{c.fact} {_shown(c.new)}"
                for c in change.changes
                if c.fact not in ("provider", "pinned", "api_version", "sampling", "top_k")
                and c.new is not None
            )
            lines.append(
                f"  {change.id}: NEW ({facts}); sampling none and top_k false until curated"
            )
        for c in () if change.new else change.changes:
            lines.append(f"  {change.id}: {c.fact} {_shown(c.old)} -> {_shown(c.new)}")
    if report.skipped:
        lines.append(f"  not added (no limits reported): {', '.join(report.skipped)}")
    if report.unlisted:
        lines.append(f"  not listed for this key, unchanged: {', '.join(report.unlisted)}")
    if written == "-":
        lines.append("override written to stdout; review it like code.")
    elif written is not None:
        lines.append(
            f"wrote {written}: review it like code, then set GATEWAY_CATALOG_OVERRIDE={written}"
        )
    return lines


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list | tuple | frozenset):
        return ",".join(str(v) for v in value) or "[]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _as_json(report: SyncReport, written: str | None) -> dict[str, Any]:
    data: dict[str, Any] = report.model_dump(mode="json", exclude={"entries", "sources"})
    data["changed"] = report.changed
    data["written"] = written
    return data
