"""The size limit holds before the body is in memory, over a real socket to a real uvicorn server."""

from __future__ import annotations

import socket

from tests.service.support import LiveServer

LIMIT = 64 * 1024


def _send(server: LiveServer, head: str, chunks: list[bytes]) -> bytes:
    """Send a request head and some body bytes, then read the answer without finishing the body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head.encode())
        for chunk in chunks:
            sock.sendall(chunk)
        # The body is deliberately left unfinished: a server that waits for all of it times out here.
        return sock.recv(65536)


def test_declared_content_length_over_the_limit_is_refused_before_any_body(live_app: LiveServer) -> None:
    head = f"POST /lookup HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: {50 * 1024 * 1024}\r\n\r\n"
    answer = _send(live_app, head, [])
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"application/problem+json" in answer


def test_chunked_body_is_refused_as_soon_as_it_passes_the_limit(live_app: LiveServer) -> None:
    head = "POST /lookup HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    piece = b"z" * 8192
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    # Just over the limit, and never the terminating zero-length chunk.
    answer = _send(live_app, head, [chunk] * (LIMIT // len(piece) + 1))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_body_under_the_limit_still_works(live_app: LiveServer) -> None:
    import httpx

    response = httpx.post(
        f"{live_app.url}/lookup", content=b"HarmonyError: x" * 100, headers={"content-type": "text/plain"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    # The whole body was read and answered: the parsed query holds the repeated text, not a cut-off prefix.
    assert body["query"]["normalized"].count("harmonyerror") >= 50, body["query"]["normalized"][:200]
