"""The body-size limit holds before the body is in memory (issue 7, "Input").

A raw socket streams a 64 MB body to a real uvicorn server in 64 KB pieces, never waiting for the server,
and watches for an answer between pieces. The server must answer 413 problem+json while the client is
still sending: with a Content-Length over the limit before reading any body, without one (chunked) as
soon as the running count passes the limit. A server that buffered the body first could only answer
after the last byte. text/plain and JSON bodies are both covered.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable

import httpx
import pytest

from service.config import Settings
from tests.reliability.conftest import LiveServer

BODY_BYTES = 64 * 1024 * 1024
"""Far more than loopback kernel buffers absorb (a few MB), so only a server that stops early can
answer before the client is done."""
PIECE = 64 * 1024
CONTENT_TYPES = {"json": "application/json", "text": "text/plain; charset=utf-8"}


def _piece(kind: str, index: int) -> bytes:
    """Body bytes that stay valid for their media type (an opening JSON string, then letters)."""
    if kind == "json" and index == 0:
        return b'{"error": "' + b"E" * (PIECE - 11)
    return (b"HarmonyError: Unexpected token 200002\n" * (PIECE // 38 + 1))[:PIECE]


def _frame(data: bytes, chunked: bool) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data


def push_until_answered(port: int, kind: str, chunked: bool) -> tuple[bytes, int]:
    """Stream a 64 MB body without waiting; return (the server's answer, bytes sent by then)."""
    head = f"POST /lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {CONTENT_TYPES[kind]}\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {BODY_BYTES}\r\n\r\n"
    answer = b""
    sent = 0
    deadline = time.monotonic() + 60
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # A small send buffer keeps what sits in kernel buffers (not read by the server) small.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PIECE)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))
        sock.sendall(head.encode())
        sock.setblocking(False)
        pending = b""
        index = 0
        while time.monotonic() < deadline and b"\r\n\r\n" not in answer:
            if not pending and sent < BODY_BYTES:
                pending = _frame(_piece(kind, index), chunked)
                index += 1
            readable, writable, _ = select.select([sock], [sock] if pending else [], [], 1.0)
            if readable:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    break
                if not data:
                    break
                answer += data
                continue
            if writable:
                try:
                    written = sock.send(pending)
                except (BrokenPipeError, ConnectionResetError):
                    pending = b""
                    continue  # the server closed its side: its answer is readable next
                pending = pending[written:]
                # Count every byte that left, framing included: a piece cut short by the server's refusal has
                # still been sent in part, and the server can only refuse after more than the limit arrived.
                sent += written
        # The rest of the answer (or all of it, for a server that waited for the last byte).
        sock.setblocking(True)
        sock.settimeout(5)
        try:
            while len(answer.partition(b"\r\n\r\n")[2]) < 40:
                more = sock.recv(65536)
                if not more:
                    break
                answer += more
        except (TimeoutError, ConnectionResetError):
            pass
    return answer, sent


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("kind", sorted(CONTENT_TYPES))
def test_oversized_body_is_refused_while_it_is_still_being_sent(
    kind: str, chunked: bool, serve_live: Callable[..., LiveServer], settings: Settings
) -> None:
    server = serve_live(settings)
    limit = settings.max_body_bytes
    answer, sent = push_until_answered(server.port, kind, chunked)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"content-type: application/problem+json" in head.lower()
    assert sent < BODY_BYTES // 4, f"the server answered only after {sent:,} bytes: it read the whole body"
    if chunked:
        # No length to trust: the server counted what arrived and stopped just past the limit.
        assert sent > limit, sent
    problem = json.loads(body[body.index(b"{") :]) if b"}" in body else None
    if problem is not None:
        assert problem["status"] == 413 and f"{limit:,}" in problem["detail"]


@pytest.mark.parametrize("kind", sorted(CONTENT_TYPES))
def test_the_limit_is_exact(kind: str, serve_live: Callable[..., LiveServer], settings: Settings) -> None:
    """One byte over is refused; a body at the limit is read and answered (so the limit is not just low)."""
    server = serve_live(settings.model_copy(update={"max_body_bytes": 4096}))
    text = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006\n"

    def body(size: int) -> bytes:
        if kind == "json":
            head, tail = b'{"error": "', b'"}'
            filler = (text.replace("\n", " ") * (size // len(text) + 1)).encode()[: size - len(head) - len(tail)]
            return head + filler + tail
        return (text * (size // len(text) + 1)).encode()[:size]

    with httpx.Client(base_url=server.url, timeout=30) as http:
        headers = {"content-type": CONTENT_TYPES[kind]}
        at_limit = http.post("/lookup", content=body(4096), headers=headers)
        assert at_limit.status_code == 200, at_limit.text
        over = http.post("/lookup", content=body(4097), headers=headers)
        assert over.status_code == 413, over.text
        assert over.headers["content-type"].startswith("application/problem+json")
        # Same refusal when the length is not declared up front (a streamed, chunked upload).
        streamed = http.post("/lookup", content=iter([body(4097)]), headers=headers)
        assert streamed.status_code == 413, streamed.text
        assert "content-length" not in streamed.request.headers
