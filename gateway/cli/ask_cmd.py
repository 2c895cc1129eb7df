"""`gateway ask TASK [PROMPT]`: send one request through the gateway.

    $ echo "Transaction: ..." | gateway ask compliance_review --caller payments-svc
    $ gateway ask --offline quant_strategy "Momentum on FX majors" --format json
    $ gateway ask --stream --offline offline_demo "The reviewer reads the"

With ``--stream`` the answer's text is printed as it arrives and the request id and seq go to
stderr at the end; Ctrl-C stops it, records the request CANCELLED and exits 130.

Exit 1 after printing the answer when it carries an answer alert (it names another model,
region or context edit than the policy pinned): the answer is recorded with its alert, and a
script must not take it as an ordinary answer.

The prompt is read from stdin when PROMPT is '-' or absent. With no ANTHROPIC_API_KEY, a task
on a Claude model stops with one line that says how to set a key or how to run offline.
"""

from __future__ import annotations

import json
import sys
import warnings

import click

from gateway import AnswerAlertWarning, Gateway, InputError, Result
from gateway.cli._boundary import CheckFailed, ExitCode
from gateway.cli._context import settings_of
from gateway.cli._render import echo_json
from gateway.logging import configure_logging


def _parse_override(text: str) -> tuple[str, object]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint="--override")
    try:
        value: object = json.loads(raw, parse_constant=_no_constant)
    except ValueError:
        value = raw  # a bare word is a string
    return key.strip(), value


def _no_constant(name: str) -> object:
    raise ValueError(name)


@click.command("ask")
@click.argument("task")
@click.argument("prompt", required=False)
@click.option("--caller", help="The calling service, recorded with the request.")
@click.option(
    "--subject",
    help="The data subject the request is about (recorded as a keyed digest only).",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A parameter the policy's [caller] table allows, e.g. max_tokens=512. Repeatable.",
)
@click.option(
    "--offline", is_flag=True, help="Run on the local model instead of Claude (no network)."
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--stream", is_flag=True, help="Print the answer's text as it arrives.")
@click.pass_context
def ask_command(
    ctx: click.Context,
    task: str,
    prompt: str | None,
    caller: str | None,
    subject: str | None,
    overrides: tuple[str, ...],
    offline: bool,
    fmt: str,
    stream: bool,
) -> None:
    """Send one request for TASK; PROMPT '-' or absent reads stdin."""
    configure_logging(level="WARNING")
    if prompt is None or prompt == "-":
        prompt = _stdin_text()
    if not prompt.strip():
        raise InputError("the prompt is empty.", hint="Pass PROMPT or pipe text on stdin.")
    parsed = dict(_parse_override(item) for item in overrides)
    # An answer alert is said in one line below and in the exit code, not as a Python warning.
    with Gateway(settings_of(ctx), offline=offline) as gw, warnings.catch_warnings():
        warnings.simplefilter("ignore", AnswerAlertWarning)
        if stream:
            result = _streamed(
                gw, task, prompt, caller, parsed or None, echo=fmt == "text", subject=subject
            )
        else:
            result = gw.complete(
                task, prompt, caller=caller, overrides=parsed or None, subject=subject
            )
    if stream and fmt == "text":
        click.echo("")
        _footer(result)
    elif fmt == "json":
        echo_json(result.as_dict())
    else:
        click.echo(result.text)
        _footer(result)
    if result.alerts:
        click.echo(
            f"answer alert: the answer differs from what the policy pinned "
            f"({', '.join(result.alerts)}); see `gateway audit show {result.request_id}`.",
            err=True,
        )
        raise CheckFailed(ExitCode.CHECK_FAILED)


def _streamed(
    gw: Gateway,
    task: str,
    prompt: str,
    caller: str | None,
    overrides: dict[str, object] | None,
    *,
    echo: bool,
    subject: str | None = None,
) -> Result:
    with gw.stream(task, prompt, caller=caller, overrides=overrides, subject=subject) as s:
        for event in s:
            if echo and event["type"] == "content_block_delta":
                delta = event["delta"]
                if delta.get("type") == "text_delta":
                    click.echo(delta["text"], nl=False)
                    sys.stdout.flush()
    return s.result


def _footer(result: Result) -> None:
    source = "replayed from the audit log" if result.cached else "recorded"
    click.echo(f"[{result.request_id} seq {result.seq}, {source}, model {result.model}]", err=True)


def _stdin_text() -> str:
    """The prompt piped in: bytes that are not UTF-8 (a lone surrogate's, Latin-1 text) are
    the caller's to fix, said in one line, not an internal error."""
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        raise InputError(
            "the prompt on stdin is not UTF-8 text.",
            hint="Convert it to UTF-8 (e.g. iconv -t UTF-8), or pass PROMPT.",
        ) from None
