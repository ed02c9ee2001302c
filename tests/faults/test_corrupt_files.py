"""Damaged and foreign files under ``--db``: every command answers with one clear line
and a documented exit code, and a file it refuses is left exactly as it was.

The kinds (seeded, so a failure names a reproducible file): files that are no SQLite
database at all, another application's SQLite database, a chongming-task store cut
short, with zeroed pages or flipped bytes, with a schema version that is missing, not a
number or from the future, and paths that are not files. Each command runs in-process
against a fresh copy of each kind.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chongming_task.cli import main

from .conftest import record
from .test_fuzz_cli import TASKS

pytestmark = pytest.mark.timeout(600)

SEED = 34

COMMANDS = [
    ["ps"], ["status", "t0"], ["history", "t0"], ["stats"], ["stop", "t0"], ["reconcile"],
    ["prune", "--keep-terminal", "1"], ["prune", "--older-than", "1d"], ["schedules"],
    ["health"], ["workers"], ["dashboard"], ["worker", "--tasks", TASKS],
    ["submit", "add", "--tasks", TASKS, "--arg", "a=1"],
    ["run", "add", "--tasks", TASKS, "--arg", "a=1"],
]  # fmt: skip
#: Commands that may write to a file they accept (a damaged store may be partly usable).
WRITERS = {"submit", "run", "worker", "stop", "reconcile", "prune"}

Maker = Callable[[Path, Path], None]  # (good store, target path)


def _sql(statements: str) -> Maker:
    def make(good: Path, target: Path) -> None:
        shutil.copy(good, target)
        lite = sqlite3.connect(target)
        try:
            lite.executescript(statements)
        finally:
            lite.close()

    return make


def _bytes(content: Callable[[random.Random], bytes]) -> Maker:
    def make(good: Path, target: Path) -> None:
        target.write_bytes(content(random.Random(f"{SEED}:{target.name}")))

    return make


def _foreign(statements: str) -> Maker:
    def make(good: Path, target: Path) -> None:
        lite = sqlite3.connect(target)
        try:
            lite.executescript(statements)
        finally:
            lite.close()

    return make


def _truncated(size: Callable[[int], int]) -> Maker:
    def make(good: Path, target: Path) -> None:
        shutil.copy(good, target)
        with target.open("r+b") as handle:
            handle.truncate(size(good.stat().st_size))

    return make


def _zeroed(page: int, count: int = 1) -> Maker:
    def make(good: Path, target: Path) -> None:
        shutil.copy(good, target)
        with target.open("r+b") as handle:
            handle.seek(page * 4096)
            handle.write(b"\0" * 4096 * count)

    return make


def _flipped(index: int) -> Maker:
    def make(good: Path, target: Path) -> None:
        data = bytearray(good.read_bytes())
        rng = random.Random(f"{SEED}:flip:{index}")
        for _ in range(1 + index % 8):
            position = rng.randrange(len(data))
            data[position] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(data))

    return make


def _directory(good: Path, target: Path) -> None:
    target.mkdir()


def _dangling_link(good: Path, target: Path) -> None:
    target.symlink_to(target.with_name("nowhere.db"))


def _header_only(good: Path, target: Path) -> None:
    target.write_bytes(good.read_bytes()[:100])


KINDS: dict[str, Maker] = {
    "empty file": _bytes(lambda rng: b""),
    "one byte": _bytes(lambda rng: b"\x00"),
    "text": _bytes(lambda rng: b"not a database\n" * 40),
    "json": _bytes(lambda rng: b'{"tasks": []}'),
    "gzip magic": _bytes(lambda rng: b"\x1f\x8b\x08" + rng.randbytes(5000)),
    "sqlite magic then noise": _bytes(lambda rng: b"SQLite format 3\x00" + rng.randbytes(8000)),
    "header only": _header_only,
    "directory": _directory,
    "dangling symlink": _dangling_link,
    "foreign table": _foreign("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"),
    "foreign with view and index": _foreign(
        "CREATE TABLE orders (id INTEGER, total REAL); CREATE INDEX o ON orders (total);"
        "CREATE VIEW big AS SELECT * FROM orders WHERE total > 100;"
    ),
    "foreign in WAL mode": _foreign("PRAGMA journal_mode=WAL; CREATE TABLE events (at TEXT);"),
    "foreign ct_tasks without ct_meta": _foreign("CREATE TABLE ct_tasks (task_id TEXT);"),
    "schema version text": _sql("UPDATE ct_meta SET value = 'abc' WHERE key = 'schema_version';"),
    "schema version negative": _sql("UPDATE ct_meta SET value = -1 WHERE key = 'schema_version';"),
    "schema version real": _sql("UPDATE ct_meta SET value = 2.5 WHERE key = 'schema_version';"),
    "schema version empty": _sql("UPDATE ct_meta SET value = '' WHERE key = 'schema_version';"),
    "schema version blob": _sql("UPDATE ct_meta SET value = x'00ff' WHERE key = 'schema_version';"),
    "schema version future": _sql("UPDATE ct_meta SET value = 999 WHERE key = 'schema_version';"),
    "schema version older": _sql("UPDATE ct_meta SET value = 1 WHERE key = 'schema_version';"),
    "schema version row missing": _sql("DELETE FROM ct_meta WHERE key = 'schema_version';"),
    "ct_meta dropped": _sql("DROP TABLE ct_meta;"),
    "ct_tasks dropped": _sql("DROP TABLE ct_tasks;"),
    "ct_transitions dropped": _sql("DROP TABLE ct_transitions;"),
    **{
        f"random bytes {size}": _bytes(lambda rng, size=size: rng.randbytes(size))  # type: ignore[misc]
        for size in (16, 512, 4096, 65536)
    },
    **{
        f"truncated to {name}": _truncated(size)
        for name, size in {
            "512 bytes": lambda n: 512,
            "one page": lambda n: 4096,
            "two pages": lambda n: 8192,
            "half": lambda n: n // 2,
            "all but one page": lambda n: n - 4096,
            "an odd size": lambda n: n - 1234,
        }.items()
    },
    **{f"page {page} zeroed": _zeroed(page) for page in (0, 1, 2, 3, 5, 8, 13)},
    "pages 3-5 zeroed": _zeroed(3, 3),
    **{f"bits flipped #{index}": _flipped(index) for index in range(12)},
}


def _good_store(root: Path) -> Path:
    good = root / "good.db"
    for number in range(6):
        out, err = io.StringIO(), io.StringIO()
        argv = ["--db", str(good), "run", "add", "--tasks", TASKS, "--arg", f"a={number}",
                "--task-id", f"t{number}"]  # fmt: skip
        assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    lite = sqlite3.connect(good)
    try:
        lite.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert lite.execute("PRAGMA page_size").fetchone()[0] == 4096
    finally:
        lite.close()
    return good


def _fingerprint(path: Path) -> Any:
    """The file's bytes (its header holds the journal mode) and its neighbours: a refused
    file must not change at all. SQLite leaves an -shm (an index, no data) and an empty
    -wal beside a file whose header says WAL, even opened read-only: those do not count."""
    beside = sorted(
        item.name
        for item in path.parent.iterdir()
        if not item.name.endswith("-shm")
        and not (item.name.endswith("-wal") and item.stat().st_size == 0)
    )
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest(), beside
    return path.is_dir(), path.is_symlink(), beside


def test_damaged_and_foreign_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .test_fuzz_cli import _quiet_environment

    _quiet_environment(tmp_path, monkeypatch)
    good = _good_store(tmp_path)
    invocations = refused = 0
    for number, (kind, make) in enumerate(KINDS.items()):
        for argv in COMMANDS:
            folder = tmp_path / f"k{number}-{argv[0]}-{len(argv)}"
            folder.mkdir()
            target = folder / "tasks.db"
            make(good, target)
            before = _fingerprint(target)
            out, err = io.StringIO(), io.StringIO()
            code = main(["--db", str(target), *argv], stdout=out, stderr=err)
            text = out.getvalue() + err.getvalue()
            case = (kind, argv, code, text[-600:])
            invocations += 1
            assert code in (0, 1, 2, 3), case
            assert "Traceback" not in text, case
            assert "internal error" not in text, case
            if code in (1, 2):
                refused += 1
                # One error line (``run`` and ``worker`` also stream their log lines).
                errors = [line for line in err.getvalue().splitlines() if " error: " in line]
                assert len(errors) == 1, case
                if argv[0] not in WRITERS or not kind.startswith(("bits", "page", "pages")):
                    # Refused before anything was written: the file is as it was.
                    assert _fingerprint(target) == before, case
            if kind.startswith("foreign"):
                assert code == 1, case
                assert _fingerprint(target) == before, case
            shutil.rmtree(folder, ignore_errors=True)
            if os.path.lexists(target):
                target.unlink()
    record(corrupt_file_kinds=len(KINDS), corrupt_file_invocations=invocations)
    print(f"{len(KINDS)} kinds, {invocations} invocations, {refused} refused")
