"""``gptoss-doctor check``: test a vLLM command, a request body or a model folder before it fails."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from service.check import CheckInputError, check_setup, read_model_folder, read_setup
from service.check.facts import Setup
from service.check.models import CheckResponse

_SEVERITY_MARK = {"error": ("ERROR", "red"), "warning": ("warn", "yellow"), "info": ("info", "bright_black")}


@click.command(name="check")
@click.argument("setup", nargs=-1)
@click.option(
    "--file", "-f", "files", multiple=True, type=click.Path(path_type=Path),
    help="Read the setup from a file (a command, an args line, a request body or a config JSON), "
    "or a model folder. Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as the API's JSON.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too, not only on errors.")
def check(setup: tuple[str, ...], files: tuple[Path, ...], as_json: bool, strict: bool) -> None:
    """Check a setup against the known problems, before it breaks.

    SETUP is a `vllm serve ...` command line (quote it, or pass it after --), the
    'non-default args: {...}' line vLLM logs at start-up, a JSON request body for Chat
    Completions or the Responses API, or a model folder. `-` reads stdin. The kind is detected.
    Every finding names the change to make and the reference section and issues behind it.
    Exit status 1 when an error is found (with --strict, also a warning), 2 on unreadable input.

    \b
    Examples:
      gptoss-doctor check -- vllm serve openai/gpt-oss-120b --tool-call-parser openai --enable-auto-tool-choice
      gptoss-doctor check /models/gpt-oss-20b          # generation_config.json, config.json, template
      gptoss-doctor check -f request.json
      docker logs vllm 2>&1 | grep 'non-default args' | gptoss-doctor check -
    """
    from service.config import load_settings

    try:
        setups = [_read_one(path) for path in files]
        if setup:
            setups.append(_read_argument(setup))
        if not setups:
            raise CheckInputError("nothing to check: pass a command, a request body, a model folder or -")
        docs_dir = load_settings().docs_dir
        reports = [check_setup(one, docs_dir) for one in setups]
    except CheckInputError as exc:
        click.secho(f"Error: {exc}", fg="red", err=True)
        sys.exit(2)
    if as_json:
        payload = [r.model_dump(mode="json") for r in reports]
        click.echo(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
    else:
        for report in reports:
            _render(report)
    failed = any(r.errors for r in reports) or (strict and any(r.warnings for r in reports))
    sys.exit(1 if failed else 0)


def _read_argument(words: tuple[str, ...]) -> Setup:
    """stdin for ``-``, a folder or file path, else the words as one command line."""
    if words == ("-",):
        return read_setup(sys.stdin.read())
    if len(words) == 1 and (Path(words[0]).is_dir() or Path(words[0]).is_file()):
        return _read_one(Path(words[0]))
    return read_setup(words[0] if len(words) == 1 else shlex.join(words))


def _read_one(path: Path) -> Setup:
    if not path.exists():
        raise CheckInputError(f"{path} does not exist")
    if path.is_dir():
        return read_model_folder(path)
    return read_setup(path.read_text(encoding="utf-8", errors="replace"))


def _render(report: CheckResponse) -> None:
    click.echo(f"Read as: {report.kind}" + (f" ({report.model})" if report.model else ""))
    for note in report.read:
        click.secho(f"  {note}", fg="bright_black")
    if not report.findings:
        click.secho("No known problem applies to this setup.", fg="green")
        return
    for finding in report.findings:
        mark, color = _SEVERITY_MARK[finding.severity]
        change = finding.change
        what = f"{change.action} {change.target}" + (f" {change.value}" if change.value else "")
        click.echo(click.style(f"[{mark}] ", fg=color, bold=True) + f"{what}  ({finding.title})")
        click.echo(f"    {finding.message}")
        if finding.found:
            click.echo(f"    you have: {change.target} {', '.join(finding.found)}")
        if finding.applies_to:
            click.echo(f"    applies to: {finding.applies_to}")
        click.secho(f"    sources: {', '.join(finding.sources)}", fg="bright_black")
    click.echo(f"{report.errors} error(s), {report.warnings} warning(s)")
