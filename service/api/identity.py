"""Every response says which service sent it: ``X-Gptoss-Doctor: <version>``.

Clients (the skill script, ``gptoss-doctor lookup``) check the header, so a port that answers but
belongs to something else (vLLM's 404, a proxy's error page) counts as "gptoss-doctor unreachable"
instead of a refusal they would misreport.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SERVICE_HEADER = "X-Gptoss-Doctor"
"""Kept in step with ``skill/scripts/lookup.py`` (standard library only, so it cannot import this)."""


class IdentifyMiddleware:
    """Pure ASGI middleware (no body buffering, streaming responses untouched) adding the header."""

    def __init__(self, app: ASGIApp, version: str) -> None:
        self.app = app
        self.header = (SERVICE_HEADER.lower().encode("latin-1"), version.encode("latin-1"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_identified(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_identified)
