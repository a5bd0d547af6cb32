"""Schema-based fuzzing of the HTTP API with schemathesis, shared by the CI test and the benchmark.

Every operation of the app's own OpenAPI gets valid and invalid generated requests; ``POST /lookup``
(a free-form body, JSON or text, plus query parameters) takes most of the budget. Each answer must
not be a 5xx, must conform to the documented status codes, content types and response schemas, and
every error must be problem+json carrying its own status.

The CI test (``tests/reliability/test_fuzz_api.py``) runs 2,000 cases on the in-process app;
``python -m bench.run --fuzz-cases 10000`` runs :func:`run` against the real served app.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
PROBLEM_JSON = "application/problem+json"
SMALL_SHARE = 60
"""Cases per mode for the operations whose input space is small; /lookup gets the rest."""


def problem_shape(response: Any) -> None:
    """An error answer is problem+json carrying its own status; 5xx never happens at all."""
    status = response.status_code
    if status < 400:
        return
    # schemathesis' Response keeps every header as a list of values.
    content_type = {k.lower(): v for k, v in response.headers.items()}.get("content-type", [""])[0]
    assert content_type.startswith(PROBLEM_JSON), (status, response.headers)
    body = json.loads(response.content)
    assert body["status"] == status and body["title"] and body["detail"], body


def fuzz_operation(operation: Any, mode: GenerationMode, examples: int, seen: Counter[str]) -> int:
    """Run up to ``examples`` generated cases of one operation; returns how many ran."""
    ran = 0

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,  # no example database written into the checkout
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(mode))
    def run_case(case: schemathesis.Case) -> None:
        nonlocal ran
        ran += 1
        response = case.call(timeout=30)
        seen[f"{operation.label} {response.status_code}"] += 1
        case.validate_response(response, checks=CHECKS)
        problem_shape(response)

    try:
        run_case()
    except Unsatisfiable:
        # Nothing to make invalid: an operation without parameters or body has no negative cases.
        assert mode is GenerationMode.NEGATIVE and ran == 0, (operation.label, mode)
    return ran


def fuzz_schema(schema: Any, cases: int) -> dict[str, Any]:
    """Fuzz every operation of a loaded schema until ``cases`` requests ran; the figures as a dict.

    Raises AssertionError (from the checks) on the first non-conforming answer.
    """
    operations = {}
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # an operation the schema cannot describe is a bug too
        operations[result.ok().label] = result.ok()
    assert "POST /lookup" in operations, sorted(operations)
    lookup = operations.pop("POST /lookup")

    seen: Counter[str] = Counter()
    started = time.monotonic()
    total = 0
    for operation in operations.values():
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            total += fuzz_operation(operation, mode, SMALL_SHARE, seen)
    # /lookup takes the rest, valid and invalid requests alternating, until the budget is spent.
    rounds = 0
    while total < cases and rounds < 50:
        mode = GenerationMode.POSITIVE if rounds % 2 == 0 else GenerationMode.NEGATIVE
        total += fuzz_operation(lookup, mode, max(50, (cases - total) // 2 + 1), seen)
        rounds += 1
    statuses = dict(sorted(seen.items()))
    server_errors = sum(n for key, n in seen.items() if key.rsplit(" ", 1)[-1].startswith("5"))
    return {
        "cases": total,
        "seconds": round(time.monotonic() - started, 1),
        "server_errors": server_errors,
        "statuses": statuses,
    }


def run(base_url: str, cases: int) -> dict[str, Any]:
    """Fuzz a running service (the benchmark's served app) through its own /openapi.json."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", wait_for_schema=30)
    try:
        return fuzz_schema(schema, cases)
    except AssertionError as exc:
        return {"failed": str(exc)[:2000]}
