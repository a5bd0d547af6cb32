"""The ``gptoss-doctor`` console script: a click group whose subcommands load lazily.

Each subcommand lives in its own module under ``service/cli/`` so ``--help`` stays fast and no
command pays for another's imports (torch, chromadb).
"""

from __future__ import annotations

import importlib

import click

_COMMANDS: dict[str, tuple[str, str]] = {
    "index": ("service.cli.index", "index"),
    "lookup": ("service.cli.lookup", "lookup"),
    "serve": ("service.cli.serve", "serve"),
    "skill": ("service.cli.skill", "skill"),
    "mcp": ("service.cli.mcp", "mcp"),
    "doctor": ("service.cli.doctor", "doctor"),
    "check": ("service.cli.check", "check"),
    "vocab": ("service.cli.vocab", "vocab"),
}

_SHORT_HELP = {
    "index": "Build or update the index (docs + bundled KB; --github syncs GitHub).",
    "lookup": "Diagnose an error string or a log (use - for stdin).",
    "serve": "Run the HTTP service (POST /lookup, /docs, /mcp, the web page).",
    "skill": "Package the Agent Skill.",
    "mcp": "Serve the MCP tools over stdio.",
    "doctor": "Check the local setup and say how to fix each problem.",
    "check": "Check a vllm serve command, a request body or a model folder before it fails.",
    "vocab": "Export the verified Harmony vocab for an offline vLLM host.",
}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module = importlib.import_module(target[0])
        command: click.Command = getattr(module, target[1])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _SHORT_HELP[name]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gptoss-doctor")
def main() -> None:
    """gptoss-doctor: diagnose gpt-oss / Harmony / vLLM failures.

    \b
    Examples:
      gptoss-doctor index                      # build the index offline (docs + bundled KB)
      gptoss-doctor lookup "Unexpected token 200002 while expecting start token 200006"
      docker logs vllm 2>&1 | tail -200 | gptoss-doctor lookup -
      gptoss-doctor serve                      # http://127.0.0.1:20120
    """
