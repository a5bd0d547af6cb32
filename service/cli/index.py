"""``gptoss-doctor index``: build or update the index (docs + bundled KB; ``--github`` syncs GitHub)."""

from __future__ import annotations

import json
import logging
import sys
import time

import click

EXIT_LOCKED = 75  # EX_TEMPFAIL: another process holds the store; retrying later is the fix


class _LogfmtFormatter(logging.Formatter):
    """One ``key=value`` line per record: quiet, greppable logs for cron and systemd."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + "Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ("step", "total"):
            value = getattr(record, key, None)
            if value is not None:
                fields[key] = value
        return " ".join(f"{key}={_quote(value)}" for key, value in fields.items())


def _quote(value: object) -> str:
    text = str(value)
    return json.dumps(text) if not text or any(c in text for c in ' "=') else text


def _configure_logging(level: str, tty: bool) -> None:
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_gptoss_doctor", False):  # ours from an earlier call (tests invoke repeatedly)
            root.removeHandler(old)
    handler: logging.Handler
    if tty:
        from rich.logging import RichHandler

        handler = RichHandler(show_path=False, show_time=False)
        root.setLevel(logging.WARNING)  # the progress bars say what is happening
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_LogfmtFormatter())
        root.setLevel(level.upper())
    setattr(handler, "_gptoss_doctor", True)  # noqa: B010 - a marker attribute logging does not declare
    root.addHandler(handler)
    for noisy in ("httpx", "chromadb", "urllib3", "github"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@click.command("index")
@click.option("--github", is_flag=True, help="Also sync GitHub issues/PRs (incremental from the watermarks).")
@click.option(
    "--full",
    is_flag=True,
    help="Rebuild into a fresh collection (re-embeds everything); the old index serves until it completes.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bars (default: on when stderr is a terminal; structured log lines otherwise).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of one line.")
@click.option(
    "--wait",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds to wait for another indexer's lock before giving up.",
)
@click.pass_context
def index(ctx: click.Context, github: bool, full: bool, progress: bool | None, as_json: bool, wait: float) -> None:
    """Build or update the index: skill/ + reference/ docs and the bundled KB, offline.

    \b
    Unchanged documents are never re-embedded. Examples:
      gptoss-doctor index                 # first build, or pick up changed docs
      gptoss-doctor index --github        # plus new/updated GitHub threads (GITHUB_TOKEN optional)
      gptoss-doctor index --full          # rebuild from scratch (also repairs a corrupt index)
    """
    from indexer.api import RunKind, run_index
    from indexer.errors import IndexerError, StoreLocked
    from service.config import load_settings
    from service.errors import DoctorError

    tty = sys.stderr.isatty()
    show_progress = tty if progress is None else progress
    try:
        settings = load_settings()
    except DoctorError as exc:
        raise click.ClickException(str(exc)) from exc
    _configure_logging(settings.log_level, show_progress)
    # Tests inject a fake embedder through the click context object; the CLI itself loads the real one.
    embedder = (ctx.obj or {}).get("embedder") if isinstance(ctx.obj, dict) else None
    try:
        summary = run_index(
            settings,
            RunKind.of(github=github, full=full),
            embedder=embedder,
            progress=show_progress,
            lock_timeout=wait,
        )
    except StoreLocked as exc:
        click.echo(f"error: {exc}", err=True)
        ctx.exit(EXIT_LOCKED)
    except (IndexerError, DoctorError) as exc:
        click.echo(f"error: {exc}", err=True)
        ctx.exit(1)
    click.echo(json.dumps(summary.as_dict()) if as_json else summary.line())
