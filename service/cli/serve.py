"""``gptoss-doctor serve``: the HTTP service under uvicorn.

Options mirror Settings and read the same environment variables, so ``--port`` and
``GPTOSS_DOCTOR_PORT`` are one knob.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from service.config import DEFAULT_PORT

if TYPE_CHECKING:
    import uvicorn

    from service.config import Settings

M_ARENA_MAX = -8
"""glibc's mallopt() parameter number for the arena limit."""


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas before the worker threads start.

    glibc gives each new thread that contends for the heap an arena of its own (up to 8 per core);
    lookups run on the server's thread pool, so over a long load the process keeps many half-empty
    arenas and its RSS only grows. Two arenas keep memory flat at no measurable cost in latency.
    Returns False where there is no glibc (nothing to do).
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        return bool(ctypes.CDLL(name).mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


def port_problem(host: str, port: int) -> str | None:
    """Why ``serve`` cannot listen on host:port, or None when it can.

    Checked before anything loads: on a vLLM host the index would otherwise load for seconds only for
    uvicorn to exit on "address already in use" without saying which knob moves the port.
    """
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        return f"cannot resolve the bind address {host!r} ({exc.strerror}); set --host or GPTOSS_DOCTOR_HOST"
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is no clash
        try:
            probe.bind(address)
        except OSError as exc:
            from service.cli.service_probe import local_url

            reason = exc.strerror or str(exc)
            client_url = local_url(host, port).rsplit(":", 1)[0] + ":N"
            return (
                f"cannot listen on {host}:{port}: {reason} (another program, such as a model server, may hold "
                f"it). Pick a free port with --port N or GPTOSS_DOCTOR_PORT=N, and point clients at it with "
                f"GPTOSS_DOCTOR_URL={client_url}."
            )
    return None


@click.command()
@click.option("--host", envvar="GPTOSS_DOCTOR_HOST", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option(
    "--port", envvar="GPTOSS_DOCTOR_PORT", default=DEFAULT_PORT, show_default=True, type=click.IntRange(1, 65535)
)
@click.option(
    "--data-dir",
    envvar="GPTOSS_DOCTOR_DATA_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the index, vocab and model cache live.",
)
@click.option("--chroma-url", envvar="GPTOSS_DOCTOR_CHROMA_URL", help="Use a Chroma server (http://host:port).")
@click.option(
    "--reindex-interval",
    envvar="GPTOSS_DOCTOR_REINDEX_INTERVAL",
    help="Re-sync GitHub every interval (e.g. 6h); off when unset.",
)
@click.option("--log-level", envvar="GPTOSS_DOCTOR_LOG_LEVEL", default="INFO", show_default=True)
def serve(
    host: str,
    port: int,
    data_dir: Path | None,
    chroma_url: str | None,
    reindex_interval: str | None,
    log_level: str,
) -> None:
    """Run the HTTP service: POST /lookup, /health, /v1/index/status, the page at /, MCP at /mcp.

    The port answers at once; lookups return 503 with Retry-After until the index is loaded (and, on
    an empty data dir, built offline from the docs and the bundled KB). OpenAPI is at /docs.

    \b
    Examples:
      gptoss-doctor serve                        # http://127.0.0.1:20120
      gptoss-doctor serve --port 20121           # when 20120 is taken
      GPTOSS_DOCTOR_REINDEX_INTERVAL=6h GPTOSS_DOCTOR_ADMIN_TOKEN=... gptoss-doctor serve --host 0.0.0.0
      gptoss-doctor serve --chroma-url http://127.0.0.1:8001   # one of several replicas
    """
    from service.config import load_settings
    from service.errors import ConfigError

    overrides: dict[str, Any] = {"host": host, "port": port, "log_level": log_level}
    for name, value in (
        ("data_dir", data_dir),
        ("chroma_url", chroma_url),
        ("reindex_interval", reindex_interval),
    ):
        if value is not None:
            overrides[name] = value
    try:
        settings = load_settings(**overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    problem = port_problem(settings.host, settings.port)
    if problem:
        raise click.ClickException(problem)
    import uvicorn

    from service.app import create_app

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    limit_malloc_arenas()
    uvicorn.Server(server_config(create_app(settings), settings)).run()


def server_config(app: Any, settings: Settings) -> uvicorn.Config:
    """uvicorn's configuration for ``app``: header and body deadlines and a connection cap (issue 16)."""
    import uvicorn

    from service.api.connections import guarded_protocol

    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        http=guarded_protocol(settings),
        timeout_keep_alive=5,  # an idle keep-alive connection is closed after 5 s (uvicorn's default)
    )
