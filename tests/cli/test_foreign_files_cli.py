"""Files that are not a chongming-task store: another application's SQLite database,
a damaged store, a mistyped PostgreSQL URL.

A write command refuses another application's database (``--create-schema`` adds the
tables deliberately); no command changes the journal mode of a file it refuses; ``run``
on a store that could not record its task exits non-zero; a mistyped URL is never
echoed with its password.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import TASKS, Result

Invoke = Callable[..., Result]

PASSWORD = "S3cretPw"


def _app_database(path: Path) -> str:
    """An application's own SQLite file: one table, one row, rollback journal."""
    lite = sqlite3.connect(path)
    try:
        lite.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        lite.execute("INSERT INTO users VALUES (1, 'ada')")
        lite.commit()
    finally:
        lite.close()
    return str(path)


def _fingerprint(path: Path) -> tuple[str, list[str]]:
    """The file's bytes and the files beside it (a -wal or -shm would show a change)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest, sorted(item.name for item in path.parent.iterdir())


def _journal_mode(path: Path) -> str:
    lite = sqlite3.connect(path)
    try:
        return str(lite.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        lite.close()


WRITE_COMMANDS = [
    ["submit", "add", "--tasks", TASKS, "--arg", "a=1"],
    ["run", "add", "--tasks", TASKS, "--arg", "a=1"],
    ["worker", "--tasks", TASKS],
]


@pytest.mark.parametrize("argv", WRITE_COMMANDS, ids=[argv[0] for argv in WRITE_COMMANDS])
def test_write_commands_refuse_another_applications_database(
    invoke: Invoke, tmp_path: Path, argv: list[str]
) -> None:
    path = tmp_path / "app.db"
    _app_database(path)
    before = _fingerprint(path)
    result = invoke("--db", str(path), *argv)
    assert result.code == 1, result.err
    assert "holds other tables (users)" in result.err
    assert "--create-schema" in result.err
    assert len(result.err_lines) == 1
    assert _fingerprint(path) == before
    assert _journal_mode(path) == "delete"


def test_create_schema_adds_the_tables_deliberately(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _app_database(path)
    first = invoke("--db", str(path), "submit", "add", "--tasks", TASKS, "--arg", "a=1",
                   "--create-schema", "--task-id", "t1")  # fmt: skip
    assert first.code == 0, first.err
    # Once the schema is there the file is ours: no flag needed any more.
    again = invoke("--db", str(path), "run", "add", "--tasks", TASKS, "--arg", "a=2")
    assert again.code == 0, again.err
    lite = sqlite3.connect(path)
    try:
        assert lite.execute("SELECT * FROM users").fetchall() == [(1, "ada")]
        assert lite.execute("SELECT count(*) FROM ct_tasks").fetchone()[0] == 2
    finally:
        lite.close()


def test_an_empty_or_new_file_needs_no_flag(invoke: Invoke, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    result = invoke("--db", str(empty), "submit", "add", "--tasks", TASKS, "--arg", "a=1")
    assert result.code == 0, result.err
    fresh = invoke("--db", str(tmp_path / "new.db"), "run", "add", "--tasks", TASKS, "--arg", "a=1")
    assert fresh.code == 0, fresh.err


REFUSING_COMMANDS = [
    ["prune", "--older-than", "1d"],
    ["prune", "--keep-terminal", "1"],
    ["stop", "x"],
    ["reconcile"],
    ["schedule", "show", "nightly"],
    ["ps"],
    ["dashboard"],
]


@pytest.mark.parametrize(
    "argv", REFUSING_COMMANDS, ids=[" ".join(a[:2]) for a in REFUSING_COMMANDS]
)
def test_a_refused_file_keeps_its_journal_mode(
    invoke: Invoke, tmp_path: Path, argv: list[str]
) -> None:
    path = tmp_path / "app.db"
    _app_database(path)
    before = _fingerprint(path)
    result = invoke("--db", str(path), *argv)
    assert result.code == 1, result.err
    assert len(result.err_lines) == 1
    assert _journal_mode(path) == "delete"
    assert _fingerprint(path) == before


def test_run_on_a_store_that_cannot_record_the_task_fails(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    for number in range(3):
        seeded = invoke("--db", str(path), "run", "add", "--tasks", TASKS, "--arg", f"a={number}")
        assert seeded.code == 0, seeded.err
    lite = sqlite3.connect(path)
    try:
        lite.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(lite.execute("PRAGMA page_size").fetchone()[0])
    finally:
        lite.close()
    # Zero the pages of the task tables (the header and ct_meta, at the start, survive:
    # the store opens, then every write of the task fails "malformed").
    with path.open("r+b") as handle:
        handle.seek(3 * page)
        handle.write(b"\0" * 3 * page)
    result = invoke("--db", str(path), "run", "add", "--tasks", TASKS, "--arg", "a=7")
    assert result.code == 1, (result.code, result.err)
    assert "the store could not record it" in result.err
    assert "internal error" not in result.err


def test_run_exit_code_holds_when_the_store_recorded_the_task(
    invoke: Invoke, tmp_path: Path
) -> None:
    ok = invoke("--db", str(tmp_path / "t.db"), "run", "add", "--tasks", TASKS, "--arg", "a=1")
    assert ok.code == 0, ok.err
    failed = invoke("--db", str(tmp_path / "t.db"), "run", "fail", "--tasks", TASKS)
    assert failed.code == 3, failed.err


MISTYPED = [
    f"postgresql//app:{PASSWORD}@db/prod",
    f"postgres//app:{PASSWORD}@db/prod",
    f"postgresql:/app:{PASSWORD}@db/prod",
    f"postgresql:app:{PASSWORD}@db/prod",
    f"POSTGRESQL//app:{PASSWORD}@db/prod",
]


@pytest.mark.parametrize("dsn", MISTYPED)
@pytest.mark.parametrize("where", ["--db", "--dsn", "CHONGMING_DB", "CHONGMING_DSN"])
@pytest.mark.parametrize("argv", [["ps"], ["submit", "add", "--tasks", TASKS, "--arg", "a=1"]])
def test_a_mistyped_postgres_url_is_never_echoed(
    invoke: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dsn: str,
    where: str,
    argv: list[str],
) -> None:
    if where.startswith("--"):
        result = invoke(where, dsn, *argv)
    else:
        monkeypatch.setenv(where, dsn)
        result = invoke(*argv)
    assert result.code == 2, result.err
    assert "did you mean postgresql://" in result.err
    assert PASSWORD not in result.out + result.err
    assert len(result.err_lines) == 1
    assert list(tmp_path.iterdir()) == []  # nothing created under the typo's name


@pytest.mark.parametrize("name", ["postgres.db", "postgresql", "pg.sqlite"])
def test_a_file_named_like_postgres_is_still_a_file(
    invoke: Invoke, tmp_path: Path, name: str
) -> None:
    result = invoke("--db", name, "run", "add", "--tasks", TASKS, "--arg", "a=1")
    assert result.code == 0, result.err
    assert (tmp_path / name).exists()
