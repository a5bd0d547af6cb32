"""``gptoss-doctor skill``: package the Agent Skill for Claude Code and other agents."""

from __future__ import annotations

from pathlib import Path

import click

from service.config import load_settings
from service.errors import DoctorError


@click.group()
def skill() -> None:
    """Work with the gpt-oss troubleshooting Agent Skill.

    \b
    Examples:
      gptoss-doctor skill package --out dist
      cp -r dist/gpt-oss-vllm-troubleshooting ~/.claude/skills/
    """


@skill.command("package")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder that receives <name>/ and <name>.zip (created if missing).",
)
def package(out_dir: Path) -> None:
    """Write the skill folder and its zip, validated with skills-ref.

    Sources come from GPTOSS_DOCTOR_DOCS_DIR (default: this checkout): skill/SKILL.md,
    skill/scripts/lookup.py and the three reference/ docs, which land in references/.
    An invalid skill is refused and nothing is written.

    \b
    Examples:
      gptoss-doctor skill package --out dist
      agentskills validate dist/gpt-oss-vllm-troubleshooting
      cp -r dist/gpt-oss-vllm-troubleshooting ~/.claude/skills/   # load it into Claude Code
    """
    from service.skill_package import build_package

    try:
        settings = load_settings()
        result = build_package(settings.docs_dir, out_dir.expanduser())
    except DoctorError as exc:
        raise click.ClickException(exc.detail) from exc
    click.echo(f"Wrote {result.directory}/ ({len(result.files)} files)")
    click.echo(f"Wrote {result.archive}")
