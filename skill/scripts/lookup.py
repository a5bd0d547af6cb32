#!/usr/bin/env python3
"""Ask a running gptoss-doctor service what an error or log means (standard library only).

Usage:
  python scripts/lookup.py "openai_harmony.HarmonyError: Unexpected token 200002 ..."
  docker logs vllm 2>&1 | tail -200 | python scripts/lookup.py -
  python scripts/lookup.py --json "unexpected tokens remaining in message header"

Environment:
  GPTOSS_DOCTOR_URL         service base URL (default http://127.0.0.1:8000)
  GPTOSS_DOCTOR_READ_TOKEN  bearer token, when the service requires one for lookups

Exit codes: 0 answer printed, 1 the service refused the request (e.g. 4xx problem+json),
2 the service is unreachable (read references/known-issues.md instead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
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
    """The service did not answer at all (connection refused, DNS, timeout)."""


class Refused(Exception):
    """The service answered with an HTTP error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def lookup(error: str, *, url: str, top_k: int, token: str | None, timeout: float) -> dict[str, Any]:
    """POST the error to ``{url}/lookup`` and return the decoded JSON answer."""
    body = json.dumps({"error": error, "top_k": top_k}).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url.rstrip("/") + "/lookup", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        raise Refused(exc.code, _problem_message(exc.code, exc.read(), exc.headers.get("Content-Type"))) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(str(reason)) from exc
    try:
        answer = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise Refused(200, f"the service answered with something that is not JSON: {payload[:200]!r}") from exc
    if not isinstance(answer, dict):
        raise Refused(200, "the service answered with JSON that is not an object")
    return answer


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


def render(answer: dict[str, Any]) -> str:
    """A compact plain-text answer for an agent: origin, tokens, issues, fixes, advice."""
    lines: list[str] = []
    analysis = _get(answer, "analysis", {})
    origin = _get(analysis, "origin", {})
    if origin:
        side = _get(origin, "side", "unknown")
        component = _get(origin, "component")
        where = f"{side} / {component}" if component else str(side)
        lines.append(f"Origin: {where}")
        if _get(origin, "explanation"):
            lines.append(f"  {origin['explanation']}")
    if _get(analysis, "category"):
        lines.append(f"Category: {analysis['category']}")
    tokens = _get(analysis, "tokens", []) or []
    if tokens:
        decoded = ", ".join(
            f"{_get(t, 'id')}={_get(t, 'text')!r}{' (special)' if _get(t, 'special') else ''}" for t in tokens
        )
        lines.append(f"Tokens: {decoded}")
    versions = _get(analysis, "versions", {}) or {}
    if versions:
        lines.append("Versions seen: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    flags = _get(analysis, "flags", []) or []
    if flags:
        lines.append("Flags seen: " + ", ".join(str(f) for f in flags))
    reproduction = _get(analysis, "reproduction")
    if isinstance(reproduction, dict) and reproduction:
        lines.append("Reproduction: " + json.dumps(reproduction, ensure_ascii=False)[:300])

    issues = _get(answer, "issues", []) or []
    if issues:
        lines.append("")
        if _get(answer, "no_confident_match"):
            lines.append("No confident match; the closest issues (low confidence):")
        else:
            lines.append("Matching issues:")
        for issue in issues:
            head = f"- {_get(issue, 'id')} [{_get(issue, 'state', '?')}, {_get(issue, 'confidence', '?')}]"
            title = _get(issue, "title")
            lines.append(f"{head} {title}" if title else head)
            if _get(issue, "url"):
                lines.append(f"  {issue['url']}")
            if _get(issue, "fixed_by"):
                lines.append("  fixed by: " + ", ".join(issue["fixed_by"]))
    else:
        lines.append("")
        lines.append("No confident match in the knowledge base.")

    fixes = _get(answer, "fixes", []) or []
    if fixes:
        lines.append("")
        lines.append("Fixes:")
        for fix in fixes:
            confirmed = " (confirmed)" if _get(fix, "confirmed") else ""
            lines.append(f"- {_get(fix, 'summary', '')}{confirmed}")
            for step in _get(fix, "steps", []) or []:
                lines.append(f"    * {step}")
            if _get(fix, "sources"):
                lines.append("    sources: " + ", ".join(fix["sources"]))
    advice = _get(answer, "advice", []) or []
    if advice:
        lines.append("")
        lines.append("Advice:")
        for item in advice:
            lines.append(f"- {_get(item, 'summary', '')}")
            if _get(item, "flags"):
                lines.append("    flags: " + " ".join(item["flags"]))
            if _get(item, "sources"):
                lines.append("    sources: " + ", ".join(item["sources"]))
    if _get(answer, "degraded"):
        lines.append("")
        lines.append("Degraded: semantic search was unavailable; lexical matches only.")
    index = _get(answer, "index", {})
    if index:
        lines.append("")
        lines.append(
            f"Index: {_get(index, 'issues', '?')} issues, {_get(index, 'documents', '?')} documents, "
            f"built {_get(index, 'built_at', '?')}"
        )
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
    try:
        answer = lookup(text, url=url, top_k=args.top_k, token=token, timeout=args.timeout)
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
