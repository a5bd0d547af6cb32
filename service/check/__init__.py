"""``gptoss-doctor check``: test a setup against the known problems before it fails.

One code path serves the CLI, ``POST /v1/check`` and the MCP tool ``check_config``. The rules are the
action tables of the reference docs (``indexer.problems``); this package reads setups and knows what
the action words mean, nothing about any particular flag.
"""

from __future__ import annotations

from pathlib import Path

from service.check.facts import CheckInputError, InputKind, Setup, read_model_folder, read_setup
from service.check.models import ChangeOut, CheckRequest, CheckResponse, FindingOut
from service.check.rules import Finding, evaluate

__all__ = ["CheckInputError", "check_request", "check_setup", "read_model_folder", "read_setup"]


def check_setup(setup: Setup, docs_dir: Path) -> CheckResponse:
    """The findings for one setup against the known problems under ``docs_dir``."""
    from indexer.problems import load_problems

    findings = [_finding_out(f) for f in evaluate(setup, load_problems(docs_dir))]
    errors = sum(f.severity == "error" for f in findings)
    warnings = sum(f.severity == "warning" for f in findings)
    return CheckResponse(
        kind=setup.kind.value,
        read=list(setup.notes),
        model=setup.model,
        versions=dict(setup.versions),
        flags=dict(setup.flags),
        findings=findings,
        errors=errors,
        warnings=warnings,
        ok=errors == 0 and warnings == 0,
    )


def check_request(request: CheckRequest, docs_dir: Path) -> CheckResponse:
    """An API request: its ``input`` text and/or model config files, read and checked."""
    if request.input and request.input.strip():
        setup = read_setup(request.input)
    else:
        setup = Setup(kind=InputKind.MODEL)
    if request.generation_config is not None or request.config is not None:
        if setup.kind is not InputKind.MODEL:
            raise CheckInputError("send model config files on their own, not with a command or request body")
        setup.generation_config = request.generation_config or setup.generation_config
        setup.model_config = request.config or setup.model_config
        setup.notes.append("model config files: read from the request")
    return check_setup(setup, docs_dir)


def _finding_out(finding: Finding) -> FindingOut:
    return FindingOut(
        severity=finding.severity,
        title=finding.title,
        message=finding.message,
        change=ChangeOut(action=finding.kind, target=finding.target, value=finding.value),  # type: ignore[arg-type]
        when=finding.when,
        applies_to=finding.applies_to,
        found=list(finding.found),
        problem=finding.problem,
        sources=list(finding.sources),
    )
