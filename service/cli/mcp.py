"""``gptoss-doctor mcp``: serve the MCP tools over stdio for Claude Code, Claude Desktop and others."""

from __future__ import annotations

import logging
import sys

import click


@click.command(name="mcp")
@click.option(
    "--log-level",
    default="WARNING",
    show_default=True,
    envvar="GPTOSS_DOCTOR_LOG_LEVEL",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Logging level (logs go to stderr; stdout carries only the protocol).",
)
def mcp(log_level: str) -> None:
    """Serve the MCP tools over stdio.

    Tools: lookup_error, decode_harmony_tokens, get_issue, list_known_issues; the reference docs
    are resources. The model and index load on the first tool call (the index is built offline
    first when none exists yet).

    \b
    Claude Code:
      claude mcp add gptoss-doctor -- gptoss-doctor mcp
    Claude Desktop / other clients (mcpServers entry):
      {"gptoss-doctor": {"command": "gptoss-doctor", "args": ["mcp"]}}
    Over HTTP instead: `gptoss-doctor serve` mounts the same server at /mcp.
    """
    from service.config import load_settings
    from service.errors import ConfigError
    from service.mcp_server import stdio_server

    # stderr only: stdout is the JSON-RPC channel.
    logging.basicConfig(stream=sys.stderr, level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings()
    except ConfigError as exc:
        raise click.ClickException(exc.detail) from exc

    def note(message: str) -> None:
        click.echo(f"gptoss-doctor: {message}", err=True)

    server, engine = stdio_server(settings, on_build=note)
    try:
        server.run("stdio")
    except KeyboardInterrupt:  # Ctrl+C in a terminal: exit quietly
        pass
    finally:
        engine.close()
