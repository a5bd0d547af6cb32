"""The machine a bench run ran on: CPU, cores, RAM, OS and the versions that decide the speed."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = (
    "torch",
    "onnxruntime",
    "sentence-transformers",
    "chromadb",
    "bm25s",
    "openai-harmony",
    "fastapi",
    "uvicorn",
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _usable_cores() -> int:
    # The affinity mask is what a container actually grants; cpu_count() shows the host.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def describe() -> dict[str, Any]:
    """CPU model, usable cores, RAM, OS, Python and the versions of the packages on the hot path."""
    return {
        "cpu": _cpu_model(),
        "cores": _usable_cores(),
        "ram_gib": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
    }


def load_average() -> float | None:
    """The 1-minute load average now (other work on the machine skews every timing)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
