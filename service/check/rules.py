"""Findings: the known problems' actions, tested against one setup.

There is no second copy of the knowledge here. Each action in a reference-doc block says what to do
(``set``, ``unset``, ``avoid``, ``upgrade``, ``check``), to what (``target`` and ``value``) and
``when``; this module only knows what those words mean. ``workaround`` actions are advice for after
a failure and are never checked.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from service.check.conditions import (
    conditions_hold,
    is_benchmark_command,
    is_request_param,
    observable,
    target_values,
    warn_when_unknown,
)
from service.check.facts import Setup
from service.versions import parse_version

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


class ActionLike(Protocol):
    """The fields of ``indexer.problems.Action`` a rule reads."""

    @property
    def kind(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def value(self) -> str | None: ...
    @property
    def when(self) -> tuple[str, ...]: ...
    @property
    def text(self) -> str: ...
    @property
    def sources(self) -> tuple[str, ...]: ...


class ProblemLike(Protocol):
    """The fields of ``indexer.problems.Problem`` a rule reads."""

    @property
    def anchor(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def actions(self) -> tuple[ActionLike, ...]: ...


@dataclass(frozen=True)
class Finding:
    """One thing about the setup that a known problem says to change."""

    severity: Severity
    problem: str
    """The reference section, ``reference/<doc>.md#anchor``."""
    title: str
    message: str
    kind: str
    target: str
    value: str | None
    when: str
    applies_to: str | None
    """The version range the finding holds for, e.g. ``vllm < 0.10.2``; None when it holds for all."""
    sources: tuple[str, ...]
    found: tuple[str, ...] = ()
    """What the setup has for the target now (``hermes`` where the parser should be ``openai``); empty when
    it is unset."""


CHECKED_KINDS = frozenset({"set", "unset", "avoid", "upgrade", "check"})

_BOOLEAN = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
_COMPARISON = re.compile(r"^(>=|<=|!=|>|<|==)?\s*(.+)$")
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "!=": operator.ne,
    "==": operator.eq,
}


def matches(actual: str, expected: str | None) -> bool:
    """Does a setup's value satisfy an action's ``value`` (``openai``, ``true``, ``>1``, ``!=0``)?

    Without an expected value any setting matches. Numbers compare as numbers, the rest as
    case-insensitive text; ``a|b`` accepts either.
    """
    if expected is None:
        return True
    if expected.strip().lower() in _BOOLEAN and actual.strip().lower() in _BOOLEAN:
        return _BOOLEAN[expected.strip().lower()] == _BOOLEAN[actual.strip().lower()]
    if "|" in expected:
        return any(matches(actual, option) for option in expected.split("|"))
    parsed = _COMPARISON.match(expected.strip())
    if parsed is None:
        return False
    op, want = parsed.group(1) or "==", parsed.group(2).strip()
    try:
        return _OPS[op](float(actual), float(want))
    except ValueError:
        pass
    if op == "!=":
        return actual.strip().lower() != want.lower()
    return op == "==" and actual.strip().lower() == want.lower()


def _severity(state: bool | None, setup: Setup, when: tuple[str, ...]) -> Severity | None:
    """error when the setup shows the conditions; warning when it can't tell but should prepare."""
    if state is True:
        return "error"
    if state is None and warn_when_unknown(when, setup):
        return "warning"
    return None


def evaluate(setup: Setup, problems: Iterable[ProblemLike]) -> list[Finding]:
    """Every finding for this setup, errors first, one per (kind, target) however many sections say it."""
    findings: dict[tuple[str, str], Finding] = {}
    for problem in problems:
        for action in problem.actions:
            if action.kind not in CHECKED_KINDS or not observable(action.target, setup):
                continue
            if is_benchmark_command(setup) and action.target.startswith("--") and "benchmark" not in action.when:
                continue  # a server flag's rule says nothing about the benchmark client's own flags
            finding = _evaluate_action(setup, problem, action)
            if finding is None:
                continue
            key = (finding.kind, finding.target)
            kept = findings.get(key)
            if kept is None or SEVERITY_ORDER[finding.severity] < SEVERITY_ORDER[kept.severity]:
                findings[key] = finding
            elif SEVERITY_ORDER[finding.severity] == SEVERITY_ORDER[kept.severity]:
                merged = tuple(dict.fromkeys([*kept.sources, *finding.sources]))
                findings[key] = replace(kept, sources=merged)
    return sorted(findings.values(), key=lambda f: (SEVERITY_ORDER[f.severity], f.problem, f.target))


def _evaluate_action(setup: Setup, problem: ProblemLike, action: ActionLike) -> Finding | None:
    state = conditions_hold(action.when, setup)
    if state is False:
        return None
    values = target_values(action.target, setup)
    applies_to: str | None = None
    if action.kind == "set":
        expected = _literal(action.value)
        if values and all(matches(v, expected) for v in values):
            return None
        if not values and is_request_param(action.target):
            return None  # an unsent request field takes the server's default: nothing was chosen wrongly
        # A value the setup chose on purpose and got wrong counts even when the condition is undecided.
        severity = _severity(state, setup, action.when) or ("warning" if values else None)
    elif action.kind in {"avoid", "unset"}:
        if not any(matches(v, _literal(action.value)) for v in values):
            return None
        severity = "error" if state is not None else "warning"
    elif action.kind == "upgrade":
        have, need = parse_version(values[0] if values else None), parse_version(action.value)
        if have is None or need is None or have >= need:
            return None
        severity = _severity(state, setup, action.when) or "warning"
        applies_to = f"{action.target} < {need}"
    else:  # check: a model file's content
        severity = _check_file(setup, action)
        if severity is None:
            return None
    if severity is None:
        return None
    return Finding(
        severity=severity,
        problem=problem.anchor,
        title=problem.title,
        message=action.text,
        kind=action.kind,
        target=action.target,
        value=action.value,
        when=", ".join(action.when),
        applies_to=applies_to,
        sources=(problem.anchor, *action.sources),
        found=tuple(values) if action.kind != "check" else (),
    )


def _literal(value: str | None) -> str | None:
    """An action value the setup can be compared with; prose (``your key``, ``low, medium or high``)
    asks only that the target be set, so it compares as "any value"."""
    if value is None or " " in value.strip():
        return None
    return value


def _check_file(setup: Setup, action: ActionLike) -> Severity | None:
    """``check`` on a model file: ``generation_config.json`` with value ``eos_token_id ⊇ a,b``-style ids.

    The value lists the ids (``200002,200012``) that must all be in the file's ``eos_token_id``.
    """
    if action.target == "generation_config.json":
        config = setup.generation_config
        if config is None or not action.value:
            return None
        eos = config.get("eos_token_id")
        have = set(eos) if isinstance(eos, list) else {eos}
        need = {int(x) for x in re.findall(r"\d{3,7}", action.value)}
        return "error" if not need <= have else None
    return None
