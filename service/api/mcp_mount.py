"""The MCP server mounted in the HTTP service: streamable HTTP at ``/mcp``, same tools as stdio.

The SDK's session manager must run for as long as the app serves, so :func:`mount_mcp` wraps the
app's lifespan around it; the endpoint applies the service's read token like ``/lookup`` does.
"""

from __future__ import annotations

import contextlib
import hmac
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from service.config import Settings
from service.mcp_server import EngineBackend, build_mcp

if TYPE_CHECKING:
    from fastapi import FastAPI
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from service.engine import LookupEngine

MCP_PATH = "/mcp"


class _McpEndpoint:
    """The ASGI endpoint at /mcp: bearer check (when a read token is set), then the session manager.

    A fresh session manager is started in each app lifespan (the SDK's manager runs only once), so
    the same app can be started and stopped again, as tests do.
    """

    def __init__(self, server: MCPServer[Any], settings: Settings) -> None:
        self.server = server
        self.settings = settings
        self.manager: StreamableHTTPSessionManager | None = None

    def new_manager(self) -> StreamableHTTPSessionManager:
        # Stateless + JSON responses: every request stands alone, so replicas behind a load balancer
        # need no sticky sessions, and no tool streams or calls back into the client.
        self.server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            host=self.settings.host,
            transport_security=transport_security(self.settings),
        )
        return self.server.session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - routes only pass http scopes
            return
        token = self.settings.read_token
        if token is not None and not _bearer_ok(scope, token.get_secret_value()):
            detail = "This endpoint requires a bearer token (Authorization: Bearer <token>)."
            await _send_problem(send, 401, "Unauthorized", detail, {"www-authenticate": "Bearer"})
            return
        if self.manager is None:
            detail = "The MCP endpoint starts with the app's lifespan; retry shortly."
            await _send_problem(send, 503, "Service not ready", detail)
            return
        if scope.get("method") == "POST":
            body = await _read_limited(scope, receive, self.settings.max_body_bytes)
            if body is None:
                detail = f"The body is over {self.settings.max_body_bytes:,} bytes (GPTOSS_DOCTOR_MAX_BODY_BYTES)."
                await _send_problem(send, 413, "Request body too large", detail, {"connection": "close"})
                return
            receive = _replay(body, receive)
        await self.manager.handle_request(scope, receive, send)


_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def transport_security(settings: Settings) -> TransportSecuritySettings | None:
    """The MCP SDK's DNS-rebinding guard: local names, plus GPTOSS_DOCTOR_MCP_ALLOWED_HOSTS.

    The SDK's own default knows only 127.0.0.1 and localhost, so behind a reverse proxy that forwards
    its public name every /mcp call got 421 "Invalid Host header". Bound to another address with no
    extra hosts configured, the SDK applies no guard, and neither does this.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    extra = list(settings.mcp_allowed_hosts)
    if settings.host not in _LOCAL_HOSTS and not extra:
        return None
    local = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    hosts = [*local, "127.0.0.1", "localhost", "[::1]", *extra]
    origins = [f"http://{host}" for host in local]
    origins += [f"{scheme}://{host}" for host in extra for scheme in ("https", "http")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


async def _read_limited(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None as soon as it is known to be over ``limit`` bytes.

    The same limit as ``/lookup``, checked before the body is in memory (the SDK's own cap is larger
    and answers in plain text).
    """
    for key, value in scope.get("headers", []):
        if key == b"content-length" and value.isdigit() and int(value) > limit:
            return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)  # the client went away: the SDK sees an empty body and answers it
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body over once, then defers to the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _bearer_ok(scope: Scope, expected: str) -> bool:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            scheme, _, given = value.decode("latin-1").partition(" ")
            # Bytes, not str: compare_digest refuses non-ASCII str (a TypeError would be a 500).
            return scheme.lower() == "bearer" and hmac.compare_digest(
                given.strip().encode("utf-8"), expected.encode("utf-8")
            )
    return False


async def _send_problem(
    send: Send, status: int, title: str, detail: str, headers: dict[str, str] | None = None
) -> None:
    """A problem+json response in the same shape as the rest of the API (before FastAPI routing)."""
    body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()
    raw = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def mount_mcp(
    app: FastAPI,
    settings: Settings,
    engine_provider: Callable[[], LookupEngine | None],
    *,
    not_ready_detail: Callable[[], str] | None = None,
) -> MCPServer[Any]:
    """Serve the MCP tools over streamable HTTP at ``/mcp`` inside ``app``; returns the server.

    ``engine_provider`` returns the app's engine (None while it loads). The SDK's session manager
    must run for as long as the app serves, so this wraps the app's lifespan: the manager starts
    before the app's own start-up and stops after its shutdown.
    """
    backend = EngineBackend(engine_provider, not_ready_detail=not_ready_detail)
    server = build_mcp(lambda: backend, docs_dir=settings.docs_dir, core_repos=settings.repos)
    endpoint = _McpEndpoint(server, settings)
    app.router.routes.append(Route(MCP_PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(asgi_app: Any) -> AsyncIterator[Any]:
        manager = endpoint.new_manager()
        async with manager.run():
            endpoint.manager = manager
            try:
                async with inner(asgi_app) as state:
                    yield state
            finally:
                endpoint.manager = None

    app.router.lifespan_context = lifespan
    return server
