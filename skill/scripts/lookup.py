#!/usr/bin/env python3
"""Ask a running gptoss-doctor service what an error or log means (standard library only).

Usage:
  python scripts/lookup.py "openai_harmony.HarmonyError: Unexpected token 200002 ..."
  docker logs vllm 2>&1 | tail -200 | python scripts/lookup.py -
  python scripts/lookup.py --json "unexpected tokens remaining in message header"

Environment:
  GPTOSS_DOCTOR_URL         service base URL (default http://127.0.0.1:20120)
  GPTOSS_DOCTOR_READ_TOKEN  bearer token, when the service requires one for lookups

Exit codes: 0 answer printed, 1 the service refused the request (e.g. 4xx problem+json),
2 the service is unreachable, or what answers is not gptoss-doctor (read references/known-issues.md
instead). A log over the service's body limit is sent as its tail, with a note on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

DEFAULT_URL = "http://127.0.0.1:20120"
SERVICE_HEADER = "X-Gptoss-Doctor"
"""Every gptoss-doctor response carries it; an answer without it comes from another program on the port."""
MAX_BODY_BYTES = 1_048_576
"""The service's default body limit (GPTOSS_DOCTOR_MAX_BODY_BYTES); a longer log is sent as its tail."""
ENV_URL = "GPTOSS_DOCTOR_URL"
ENV_TOKEN = "GPTOSS_DOCTOR_READ_TOKEN"
CLIENT_ENV_VARS = (ENV_URL, ENV_TOKEN)
"""Environment variables this client reads (the docs may name them; tests check they exist here)."""

EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE = 0, 1, 2
FALLBACK_HINT = (
    "Read references/known-issues.md (search it for the exact error string or the token ids) "
    "and references/tool-calling-setup.md / references/model-updates.md."
)


class Unreachable(Exception):
    """gptoss-doctor did not answer: connection refused, DNS, timeout, or another program answered."""


class Refused(Exception):
    """The service answered with an HTTP error."""

    def __init__(self, status: int, message: str, limit: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.limit = limit  # the service's body limit, when it refused the body as too large (413)


def fit_body(error: str, top_k: int, limit: int) -> tuple[bytes, str]:
    """The JSON body and the error text it carries: the whole error, or its tail when the body would be
    over ``limit`` bytes (a log's root cause is near its end). The tail starts at a line when it can."""
    body = json.dumps({"error": error, "top_k": top_k}).encode("utf-8")
    while len(body) > limit and error:
        keep = max(0, int(len(error) * (limit - 64) / len(body)) - 1)
        error = error[len(error) - keep :] if keep else ""
        newline = error.find("\n")
        if 0 <= newline < len(error) // 10:  # a line boundary close to the cut: start there
            error = error[newline + 1 :]
        body = json.dumps({"error": error, "top_k": top_k}).encode("utf-8")
    return body, error


def _is_doctor(headers: Any) -> bool:
    return headers is not None and headers.get(SERVICE_HEADER) is not None


def lookup(
    error: str, *, url: str, top_k: int, token: str | None, timeout: float, body: bytes | None = None
) -> dict[str, Any]:
    """POST the error to ``{url}/lookup`` and return the decoded JSON answer.

    An answer without the ``X-Gptoss-Doctor`` header is not gptoss-doctor's (vLLM's 404 on the same
    port, a proxy page): it raises Unreachable, like a closed port.
    """
    if body is None:
        body = json.dumps({"error": error, "top_k": top_k}).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url.rstrip("/") + "/lookup", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
            identified = _is_doctor(response.headers)
            status = response.status
    except urllib.error.HTTPError as exc:
        if not _is_doctor(exc.headers):
            raise Unreachable(f"HTTP {exc.code} from a program that is not gptoss-doctor") from exc
        raw = exc.read()
        message = _problem_message(exc.code, raw, exc.headers.get("Content-Type"))
        raise Refused(exc.code, message, _body_limit(raw) if exc.code == 413 else None) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(str(reason)) from exc
    if not identified:
        raise Unreachable(f"HTTP {status} from a program that is not gptoss-doctor")
    try:
        answer = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise Refused(200, f"the service answered with something that is not JSON: {payload[:200]!r}") from exc
    if not isinstance(answer, dict):
        raise Refused(200, "the service answered with JSON that is not an object")
    return answer


def _body_limit(raw: bytes) -> int | None:
    """``max_body_bytes`` from a 413 problem+json body, when the service said it."""
    try:
        limit = json.loads(raw).get("max_body_bytes")
    except (ValueError, AttributeError):
        return None
    return limit if isinstance(limit, int) and limit > 0 else None


def _problem_message(status: int, raw: bytes, content_type: str | None) -> str:
    """Turn an RFC 9457 problem+json body (or any error body) into one readable line."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        problem = json.loads(text)
    except json.JSONDecodeError:
        problem = None
    if isinstance(problem, dict) and ("title" in problem or "detail" in problem):
        title = problem.get("title") or f"HTTP {status}"
        detail = problem.get("detail")
        message = f"{title} ({problem.get('status', status)})"
        return f"{message}: {detail}" if detail else message
    kind = f" [{content_type}]" if content_type else ""
    return f"HTTP {status}{kind}: {text[:300] or 'no body'}"


def _get(mapping: Any, key: str, default: Any = None) -> Any:
    return mapping.get(key, default) if isinstance(mapping, dict) else default


BRIEF_ISSUES = 3
BRIEF_FIXES = 2


def _sources(item: Any) -> str:
    return ", ".join(str(s) for s in _get(item, "sources", []) or [])


def _label(action: Any) -> str:
    """``set --tool-call-parser openai``, ``avoid ignore_eos``, ``upgrade vllm 0.10.2`` or the bare kind."""
    kind, target, value = _get(action, "kind", "?"), _get(action, "target"), _get(action, "value")
    if kind in {"workaround", "check"} or not target:
        return str(kind)
    if value is None or (kind == "avoid" and str(value).lower() in {"true", "1", "yes"}):
        return f"{kind} {target}"
    joiner = "=" if kind in {"set", "unset"} and not str(target).startswith("-") else " "
    return f"{kind} {target}{joiner}{value}"


def render(answer: dict[str, Any]) -> str:
    """A brief plain-text answer for an agent: the verdict and its actions first, then the top issues.

    Sources under ``references/`` are files of this skill's folder; the rest are GitHub ids or URLs.
    """
    lines: list[str] = []
    diagnosis = _get(answer, "diagnosis")
    if _get(answer, "scope_note"):
        lines.append(f"Outside what this tool covers: {answer['scope_note']}")
    if isinstance(diagnosis, dict) and diagnosis:
        lines.append(f"Diagnosis: {_get(diagnosis, 'title', '?')} ({_get(diagnosis, 'confidence', '?')} confidence)")
        if _get(diagnosis, "summary"):
            lines.append(f"  {diagnosis['summary']}")
        status = _get(_get(diagnosis, "verdict", {}), "text")
        if status:
            lines.append(f"Status: {status}")
        actions = _get(diagnosis, "actions", []) or []
        if actions:
            lines.append("Do:")
        for number, action in enumerate(actions, start=1):
            lines.append(f"  {number}. [{_label(action)}] {_get(action, 'text', '')}")
            if _get(action, "sources"):
                lines.append(f"     sources: {_sources(action)}")
        if _get(diagnosis, "problem"):
            lines.append(f"Section: {diagnosis['problem']}")
    elif _get(answer, "scope_note"):
        pass  # said first: no diagnosis for another model
    elif _get(answer, "no_confident_match"):
        lines.append("No confident match in the knowledge base.")
    else:
        lines.append("No known problem in the references matches; the closest issues follow.")

    analysis = _get(answer, "analysis", {})
    origin = _get(analysis, "origin", {})
    if origin:
        side = _get(origin, "side", "unknown")
        component = _get(origin, "component")
        lines.append(f"Origin: {side} / {component}" if component else f"Origin: {side}")
    tokens = _get(analysis, "tokens", []) or []
    if tokens:
        lines.append("Tokens: " + ", ".join(f"{_get(t, 'id')}={_get(t, 'text')!r}" for t in tokens[:6]))

    issues = _get(answer, "issues", []) or []
    if issues:
        lines.append("Top issues:")
        for issue in issues[:BRIEF_ISSUES]:
            head = f"- {_get(issue, 'id')} [{_get(issue, 'state', '?')}, {_get(issue, 'confidence', '?')}]"
            title = _get(issue, "title")
            lines.append(f"{head} {title}" if title else head)
            if _get(issue, "url"):
                lines.append(f"  {issue['url']}")
        if _get(answer, "untrusted_text"):
            lines.append(f"Note: {answer['untrusted_text']}")
    if not (isinstance(diagnosis, dict) and diagnosis):
        for fix in (_get(answer, "fixes", []) or [])[:BRIEF_FIXES]:
            lines.append(f"Fix: {_get(fix, 'summary', '')}")
            for step in (_get(fix, "steps", []) or [])[:3]:
                lines.append(f"  * {step}")
            if _get(fix, "sources"):
                lines.append(f"  sources: {_sources(fix)}")
    if _get(answer, "degraded"):
        lines.append("Degraded: semantic search was unavailable; lexical matches only.")
    lines.append("(--json prints the whole answer: every issue, fixes and advice)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="lookup.py",
        description="Diagnose a gpt-oss / Harmony / vLLM error with a running gptoss-doctor service.",
    )
    parser.add_argument("error", help="the error line or log text; '-' reads it from stdin")
    parser.add_argument("--json", action="store_true", help="print the raw JSON answer")
    parser.add_argument("--top-k", type=int, default=5, help="how many issues to return (1-50, default 5)")
    parser.add_argument("--url", default=None, help=f"service URL (default ${ENV_URL} or {DEFAULT_URL})")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the answer")
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=MAX_BODY_BYTES,
        help=f"largest request body; a longer log is sent as its tail (default {MAX_BODY_BYTES}, the service's)",
    )
    args = parser.parse_args(argv)

    text = sys.stdin.read() if args.error == "-" else args.error
    if not text.strip():
        print("lookup.py: nothing to look up (empty error text)", file=sys.stderr)
        return EXIT_REFUSED
    if not 1 <= args.top_k <= 50:
        print("lookup.py: --top-k must be between 1 and 50", file=sys.stderr)
        return EXIT_REFUSED
    url = args.url or os.environ.get(ENV_URL) or DEFAULT_URL
    token = os.environ.get(ENV_TOKEN) or None
    limit = max(1024, args.max_bytes)
    try:
        for attempt in (1, 2):  # a second time only when the service's limit is lower than ours
            body, sent = fit_body(text, args.top_k, limit)
            if len(sent) < len(text):
                print(
                    f"lookup.py: the input is over {limit:,} bytes as a request; sending its last "
                    f"{len(sent):,} of {len(text):,} characters ({sent.count(chr(10)) + 1:,} lines).",
                    file=sys.stderr,
                )
            try:
                answer = lookup(text, url=url, top_k=args.top_k, token=token, timeout=args.timeout, body=body)
                break
            except Refused as exc:
                if attempt == 2 or exc.status != 413 or exc.limit is None or exc.limit >= limit:
                    raise
                limit = max(1024, exc.limit)
    except Unreachable as exc:
        print(f"lookup.py: gptoss-doctor service unreachable at {url} ({exc}).", file=sys.stderr)
        print(f"lookup.py: {FALLBACK_HINT}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except Refused as exc:
        print(f"lookup.py: the service refused the request: {exc.message}", file=sys.stderr)
        if exc.status == 401:
            print(f"lookup.py: set {ENV_TOKEN} to the service's read token.", file=sys.stderr)
        return EXIT_REFUSED
    print(json.dumps(answer, indent=2, ensure_ascii=False) if args.json else render(answer))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
