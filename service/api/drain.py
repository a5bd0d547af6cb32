"""A refused upload still gets its answer: after a 413 the server reads (and drops) the rest of the body.

The 413 is sent as soon as the limit is known to be exceeded, before the body is read. A client that
sends its whole body before reading anything (urllib, http.client) then finds the connection closed
under it: closing a socket with unread bytes makes the kernel send a reset, and the client reports
"connection reset by peer" instead of the 413. So the response is written at once, and its end is held
back while the rest of the body is drained (bounded in bytes and time); only then does the connection
close, cleanly. Clients that read while sending (curl, httpx) see the 413 as early as before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DRAIN_MAX_BYTES = 64 * 1024 * 1024
"""Most body bytes drained after a 413; beyond this the connection is dropped (a reset, as before)."""
DRAIN_MAX_SECONDS = 15.0
"""Longest drain: a client that trickles its body does not hold the connection open for long."""


class DrainRefusedBody:
    """Pure ASGI middleware: on a 413, send the response, drain the request body, then end the response."""

    def __init__(
        self, app: ASGIApp, max_bytes: int = DRAIN_MAX_BYTES, max_seconds: float = DRAIN_MAX_SECONDS
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = False
        refused = False

        async def tracking_receive() -> Message:
            nonlocal body_done
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                body_done = True
            return message

        async def draining_send(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start":
                refused = message["status"] == 413
            elif message["type"] == "http.response.body" and refused and not message.get("more_body", False):
                if not body_done:
                    await send({**message, "more_body": True})  # the whole answer goes out now
                    await self._drain(tracking_receive, lambda: body_done)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
            await send(message)

        await self.app(scope, tracking_receive, draining_send)

    async def _drain(self, receive: Receive, done: Callable[[], bool]) -> None:
        """Read and drop body messages until the body ends, the client leaves, or a bound is hit."""
        deadline = time.monotonic() + self.max_seconds
        drained = 0
        while not done() and drained <= self.max_bytes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                message = await asyncio.wait_for(receive(), timeout=remaining)
            except TimeoutError:
                return
            drained += len(message.get("body", b""))
