"""``gptoss-doctor doctor``: check the local setup and say how to fix each problem."""

from __future__ import annotations

import json
import logging
import os

import click

_MARKS = {
    "ok": ("ok", "green"),
    "warn": ("warn", "yellow"),
    "fail": ("FAIL", "red"),
    "skip": ("skip", "bright_black"),
}


@click.command(name="doctor")
@click.option(
    "--fix",
    is_flag=True,
    help="Rebuild a missing or corrupt Harmony vocab and build a missing or "
    "stale index (both offline), then check again.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--strict", is_flag=True, help="Exit non-zero on warnings too (e.g. a stale index).")
def doctor(fix: bool, as_json: bool, strict: bool) -> None:
    """Check the local setup and say how to fix each problem.

    Checks the data folder, the reference docs, the Harmony vocab (present, sha256-verified,
    decodes), the embedding model (loads, encodes), the Chroma server (when
    GPTOSS_DOCTOR_CHROMA_URL is set), and the index (present, holds the bundled KB and the current
    docs, GitHub sync age). Exit status 1 when a check fails (with --strict, also on a warning).

    \b
    Examples:
      gptoss-doctor doctor
      gptoss-doctor doctor --fix          # provision the vocab and build the index, offline
      GPTOSS_DOCTOR_CHROMA_URL=http://127.0.0.1:8001 gptoss-doctor doctor --json
    """
    from service.config import load_settings
    from service.doctor import config_failure, run_checks, summary_line
    from service.errors import ConfigError

    # Library chatter (model export, progress bars) would drown the report; errors are in the checks.
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        settings = load_settings()
    except ConfigError as exc:
        report = config_failure(exc.detail)
    else:
        report = run_checks(settings, fix=fix)
    failed = bool(report.failures) or (strict and bool(report.warnings))
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        width = max(len(c.name) for c in report.checks)
        for check in report.checks:
            label, colour = _MARKS[check.status]
            click.echo(
                f"{click.style(label.ljust(4), fg=colour, bold=check.status == 'fail')}  "
                f"{check.name.ljust(width)}  {check.detail}"
            )
            if check.fix and check.status in ("fail", "warn"):
                click.echo(f"{'':4}  {'':{width}}  {click.style('fix:', bold=True)} {check.fix}")
        click.echo(summary_line(report, strict=strict))
    if failed:
        raise SystemExit(1)
