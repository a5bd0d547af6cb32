"""The layers point one way: the indexer never imports the service (issue 14)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from indexer.config import PROJECT_ROOT

INDEXER = PROJECT_ROOT / "indexer"


def _imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` names, at any depth (TYPE_CHECKING and function bodies too)."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def _rel(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT))


INDEXER_MODULES = sorted(INDEXER.rglob("*.py"))


def test_the_walk_sees_the_indexer() -> None:
    assert len(INDEXER_MODULES) > 10
    assert "service.config" in _imported_modules(PROJECT_ROOT / "service" / "engine.py") | _imported_modules(
        PROJECT_ROOT / "service" / "cli" / "serve.py"
    )


@pytest.mark.parametrize("path", INDEXER_MODULES, ids=_rel)
def test_indexer_module_does_not_import_the_service(path: Path) -> None:
    offending = sorted(m for m in _imported_modules(path) if m == "service" or m.startswith("service."))
    assert not offending, f"{_rel(path)} imports {offending}: the indexer must not depend on the service"
