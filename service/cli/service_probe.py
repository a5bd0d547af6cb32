"""Is gptoss-doctor already serving on this host? Then ``lookup`` asks it instead of loading the index.

A cold in-process lookup opens Chroma, the embedder and Harmony (seconds); a running service answers in
milliseconds. The probe is one loopback ``GET /ready`` with a short timeout, and only an answer that
carries the ``X-Gptoss-Doctor`` header counts (vLLM or anything else on the port is ignored). Standard
library only, so the probe itself costs nothing to import.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from service.api.identity import SERVICE_HEADER

PROBE_TIMEOUT = 0.5
"""Seconds for the loopback probe: a local service answers /ready in a few ms, a closed port at once."""


def local_url(host: str, port: int) -> str:
    """The URL a client on this host uses for ``serve``'s bind address (a wildcard bind is loopback)."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def is_doctor(headers: object) -> bool:
    """True when response headers say gptoss-doctor sent them."""
    get = getattr(headers, "get", None)
    return get is not None and get(SERVICE_HEADER) is not None


def ready_service(url: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when gptoss-doctor answers ``GET {url}/ready`` with 200 (loaded and ready for lookups)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/ready", timeout=timeout) as response:
            return response.status == 200 and is_doctor(response.headers)
    except (urllib.error.URLError, OSError, ValueError):
        return False
