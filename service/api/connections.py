"""Connection guards for the server ``serve`` starts: header and body deadlines, a connection cap.

uvicorn keeps a connection open for as long as the client trickles bytes: one that sends half its
headers, or a body one byte a minute, holds a file descriptor forever, and some thousands of them
exhaust the process's descriptors so nobody else gets in. uvicorn has no setting for this, so the
protocol is extended: a request must send its headers within ``header_timeout`` seconds of its first
byte (or of the connection opening), and its body within ``body_timeout`` seconds of the headers;
otherwise the connection is closed. Connections beyond ``max_connections`` are closed on accept.
A reverse proxy in front does the same job better (see the README's security section).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.config import Settings

log = logging.getLogger(__name__)


def guarded_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with this service's deadlines and connection cap."""
    header_timeout, body_timeout = settings.header_timeout, settings.body_timeout
    max_connections = settings.max_connections

    class GuardedProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                _refused(max_connections)
                transport.close()
                return
            self._arm(header_timeout, "headers")

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._deadline is None:  # a keep-alive connection's next request starts its clock here
                self._arm(header_timeout, "headers")

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._arm(body_timeout, "body")

        def on_message_complete(self) -> None:
            self._disarm()
            super().on_message_complete()

        def _arm(self, seconds: float, what: str) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._expired, what, seconds)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self, what: str, seconds: float) -> None:
            self._deadline = None
            log.info("closed a connection from %s: its %s took over %gs", _peer(self.client), what, seconds)
            self.transport.close()

    return GuardedProtocol


_last_refusal_log = 0.0


def _refused(limit: int) -> None:
    """Log refused connections at most every 10 s: a flood must not flood the log too."""
    global _last_refusal_log
    now = time.monotonic()
    if now - _last_refusal_log >= 10.0:
        _last_refusal_log = now
        log.warning("refusing connections: %d are open (GPTOSS_DOCTOR_MAX_CONNECTIONS)", limit)


def _peer(client: Any) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown client"
