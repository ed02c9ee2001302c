"""Facts about the machine and the software a result was produced with.

A benchmark figure without its context cannot be compared with another one, so every
result file records the interpreter, our package (version and git commit), the peers,
SQLite and PostgreSQL versions, and the hardware the run saw.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from harness import pg

REPO = Path(__file__).resolve().parents[2]


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def _filesystem(path: str) -> str:
    """Filesystem type holding ``path`` (where the SQLite files live: fsync cost)."""
    best, fstype = "", "?"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and path.startswith(parts[1]) and len(parts[1]) > len(best):
                best, fstype = parts[1], f"{parts[2]} ({parts[0]} on {parts[1]})"
    except OSError:
        pass
    return fstype


def machine() -> dict[str, object]:
    """Cores, memory, CPU model and the filesystem of the temporary directory."""
    return {
        "temp_dir": tempfile.gettempdir(),
        "temp_filesystem": _filesystem(os.path.realpath(tempfile.gettempdir())),
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": _usable_cores(),
        "memory_gb": _memory_gb(),
        "platform": platform.platform(),
        "load_average": _load_average(),
    }


def _load_average() -> list[float] | None:
    """1/5/15-minute load average: other work on the machine skews every figure."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def versions(postgres_dsn: str | None) -> dict[str, object]:
    """Versions of Python, our package, the peers, SQLite and PostgreSQL."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    server = pg.server_settings(postgres_dsn).get("server_version") if postgres_dsn else None
    return {
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "chongming_task": _dist_version("chongming-task"),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "huey": _dist_version("huey"),
        "apscheduler": _dist_version("apscheduler"),
        "psycopg": _dist_version("psycopg"),
        "sqlite_library": sqlite3.sqlite_version,
        "postgresql_server": server,
    }


def postgres_facts(postgres_dsn: str | None) -> dict[str, object]:
    """Where PostgreSQL ran and the settings that decide what a commit costs."""
    if postgres_dsn is None:
        return {"dsn": None, "settings": {}}
    return {"dsn": pg.redacted(postgres_dsn), "settings": pg.server_settings(postgres_dsn)}
