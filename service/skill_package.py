"""Build the Agent Skill package: ``<name>/`` (SKILL.md, references/, scripts/) plus ``<name>.zip``.

Repository layout (sources, under ``Settings().docs_dir``)::

    skill/SKILL.md            skill/scripts/lookup.py
    reference/known-issues.md reference/model-updates.md reference/tool-calling-setup.md

Package layout (what agents load)::

    <name>/SKILL.md
    <name>/references/{known-issues,model-updates,tool-calling-setup}.md
    <name>/scripts/lookup.py

The package is assembled in a temporary folder next to the output, validated with
``skills_ref.validate`` plus the spec rules skills-ref does not check (body length, links one level
deep that resolve inside the package), and only then moved into place: an invalid skill leaves the
output folder untouched.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import skills_ref
from skills_ref.errors import ParseError
from skills_ref.parser import parse_frontmatter

from service.errors import DoctorError

REFERENCE_DOCS = ("known-issues.md", "model-updates.md", "tool-calling-setup.md")
SCRIPTS = ("lookup.py",)
MAX_BODY_LINES = 500
_LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(?:#[^)\s]*)?\)")


class InvalidSkill(DoctorError):
    """The skill sources do not make a valid Agent Skill; nothing was written."""

    status = 422
    title = "Invalid skill"


@dataclass(frozen=True)
class SkillPackage:
    """Where a package was written."""

    name: str
    directory: Path
    archive: Path
    files: tuple[str, ...]


def skill_name(skill_md: Path) -> str:
    """The ``name`` in a SKILL.md frontmatter (InvalidSkill when it cannot be read)."""
    try:
        metadata, _ = parse_frontmatter(skill_md.read_text(encoding="utf-8"))
    except (OSError, ParseError) as exc:
        raise InvalidSkill(f"{skill_md}: {exc}") from exc
    name = metadata.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidSkill(f"{skill_md}: the frontmatter has no 'name'")
    return name.strip()


def validate_package(directory: Path) -> list[str]:
    """Every problem with an assembled package: skills-ref's checks plus body length and links."""
    problems = list(skills_ref.validate(directory))
    skill_md = directory / "SKILL.md"
    if not skill_md.is_file():
        return problems
    try:
        _, body = parse_frontmatter(skill_md.read_text(encoding="utf-8"))
    except ParseError:
        return problems  # skills-ref already reported it
    body_lines = len(body.splitlines())
    if body_lines >= MAX_BODY_LINES:
        problems.append(f"SKILL.md body has {body_lines} lines; keep it under {MAX_BODY_LINES}")
    for target in sorted(set(_LINK.findall(body))):
        if target.count("/") > 1:
            problems.append(f"SKILL.md links {target}: references must be one level deep")
        if not (directory / target).is_file():
            problems.append(f"SKILL.md links {target}, which is not in the package")
    return problems


def _assemble(docs_dir: Path, target: Path) -> list[str]:
    """Copy the sources into ``target`` (the package folder); return the relative file list."""
    sources = {"SKILL.md": docs_dir / "skill" / "SKILL.md"}
    sources.update({f"references/{doc}": docs_dir / "reference" / doc for doc in REFERENCE_DOCS})
    sources.update({f"scripts/{script}": docs_dir / "skill" / "scripts" / script for script in SCRIPTS})
    missing = [str(path) for path in sources.values() if not path.is_file()]
    if missing:
        raise InvalidSkill("missing skill sources: " + ", ".join(missing))
    for relative, source in sources.items():
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    os.chmod(target / "scripts" / "lookup.py", 0o755)
    return sorted(sources)


def _zip(directory: Path, archive: Path) -> None:
    """Zip ``directory`` so that its single top-level entry is ``<directory.name>/``."""
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.write(directory, f"{directory.name}/")
        for path in sorted(directory.rglob("*")):
            arcname = path.relative_to(directory.parent).as_posix()
            zf.write(path, arcname + "/" if path.is_dir() else arcname)


def build_package(docs_dir: Path, out_dir: Path) -> SkillPackage:
    """Assemble, validate and write the package into ``out_dir``; InvalidSkill leaves no trace."""
    name = skill_name(docs_dir / "skill" / "SKILL.md")
    if "/" in name or "\\" in name or name in {".", ".."}:
        raise InvalidSkill(f"skill name {name!r} cannot be used as a folder name")
    out_dir = out_dir.resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidSkill(f"--out {out_dir} exists and is not a directory")
    created = out_dir  # the topmost folder this call creates, removed again on failure
    while not created.parent.exists():
        created = created.parent
    existed = out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        # Build inside out_dir so the final renames stay on one filesystem (atomic moves).
        with tempfile.TemporaryDirectory(prefix=".skill-build-", dir=out_dir) as tmp:
            staging = Path(tmp) / name
            staging.mkdir()
            files = _assemble(docs_dir, staging)
            problems = validate_package(staging)
            if problems:
                raise InvalidSkill(
                    f"the skill in {docs_dir} is not valid, nothing was written:\n  - " + "\n  - ".join(problems)
                )
            archive_tmp = Path(tmp) / f"{name}.zip"
            _zip(staging, archive_tmp)
            directory, archive = out_dir / name, out_dir / f"{name}.zip"
            if directory.exists():
                shutil.rmtree(directory)
            staging.rename(directory)
            archive_tmp.replace(archive)
    except BaseException:
        if not existed:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return SkillPackage(name=name, directory=directory, archive=archive, files=tuple(files))
