"""Every user error: one line on stderr, exit code 1 or 2, no traceback, store unchanged.

Each case runs the real console script against a store that already holds a finished
task (``done``), dumps every table before and after, and requires them equal: a
refused command writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_task.policies import BucketPolicy

from .conftest import MODULES, TASKS, Result, store_dump

Cli = Callable[..., Result]
Invoke = Callable[..., Result]

_UNOWNED_KEY = next(
    f"key{i}" for i in range(1000) if BucketPolicy(num_buckets=8).bucket_for(f"key{i}") != 0
)

# (id, argv after "--db DB", exit code, fragment of the message)
CASES: list[tuple[str, list[str], int, str]] = [
    ("unknown-task", ["run", "nosuch", "--tasks", TASKS], 1, "unknown task 'nosuch'"),
    ("unknown-task-submit", ["submit", "nosuch", "--tasks", TASKS], 1, "unknown task 'nosuch'"),
    ("unknown-task-id-status", ["status", "nosuch"], 1, "unknown task id 'nosuch'"),
    ("unknown-task-id-history", ["history", "nosuch"], 1, "unknown task id 'nosuch'"),
    ("unknown-task-id-stop", ["stop", "nosuch"], 1, "unknown task id 'nosuch'"),
    ("unknown-task-id-pause", ["pause", "nosuch"], 1, "unknown task id 'nosuch'"),
    ("finished-task-stop", ["stop", "done"], 1, "already finished (succeeded)"),
    ("finished-task-resume", ["resume", "done"], 1, "already finished (succeeded)"),
    ("missing-module", ["run", "add", "--tasks", "no_such_module"], 1, "cannot import task module"),
    ("missing-module-file", ["run", "add", "--tasks", "/nonexistent/t.py"], 1, "does not exist"),
    ("missing-tasks-option", ["run", "add"], 2, "--tasks MODULE is required"),
    (
        "worker-keep-finished-negative",
        ["worker", "--tasks", TASKS, "--keep-finished", "-1"],
        2,
        "--keep-finished must be a number of tasks >= 0, got -1",
    ),
    (
        "module-without-tasks",
        ["run", "add", "--tasks", str(MODULES / "empty_tasks.py")],
        1,
        "defines no tasks",
    ),
    (
        "module-import-fails",
        ["tasks", "--tasks", str(MODULES / "broken_tasks.py")],
        1,
        "failed to import: RuntimeError: this module is broken on purpose",
    ),
    ("arg-without-equals", ["run", "add", "--tasks", TASKS, "--arg", "a"], 2, "key=value"),
    ("arg-bad-name", ["run", "add", "--tasks", TASKS, "--arg", "1a=2"], 2, "not a valid argument"),
    (
        "arg-reserved-name",
        ["run", "add", "--tasks", TASKS, "--arg", "task_id=x"],
        2,
        "set it with --task-id",
    ),
    (
        "arg-twice",
        ["run", "add", "--tasks", TASKS, "--arg", "a=1", "--arg", "a=2"],
        2,
        "given twice",
    ),
    (
        "args-json-invalid",
        ["run", "add", "--tasks", TASKS, "--args-json", "{"],
        2,
        "not valid JSON",
    ),
    (
        "args-json-not-object",
        ["run", "add", "--tasks", TASKS, "--args-json", "[1]"],
        2,
        "must be a JSON object",
    ),
    (
        "args-do-not-fit-missing",
        ["run", "add", "--tasks", TASKS],
        1,
        "missing a required argument: 'a'",
    ),
    (
        "args-do-not-fit-unexpected",
        ["submit", "add", "--tasks", TASKS, "--arg", "a=1", "--arg", "c=3"],
        1,
        "unexpected keyword argument 'c'",
    ),
    ("owned-bucket-out-of-range", ["--owned-buckets", "0-70", "ps"], 2, "outside 0..63"),
    ("owned-bucket-syntax", ["--owned-buckets", "0-x", "ps"], 2, "not a bucket number"),
    ("num-buckets-zero", ["--num-buckets", "0", "ps"], 2, "positive integer"),
    ("ps-bucket-out-of-range", ["ps", "--bucket", "99"], 2, "outside 0..63"),
    ("ps-unknown-status", ["ps", "--status", "running,bogus"], 2, "'bogus' is not a status"),
    (
        "missing-bucket-key",
        ["--owned-buckets", "0-15", "run", "add", "--tasks", TASKS, "--arg", "a=1"],
        1,
        "--bucket-key is required",
    ),
    (
        "bucket-not-owned",
        [
            "--num-buckets",
            "8",
            "--owned-buckets",
            "0",
            "run",
            "add",
            "--tasks",
            TASKS,
            "--arg",
            "a=1",
            "--bucket-key",
            _UNOWNED_KEY,
        ],
        1,
        "is not owned by this node",
    ),
    (
        "duplicate-task-id-run",
        ["run", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "done"],
        1,
        "already exists",
    ),
    (
        "duplicate-task-id-submit",
        ["submit", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "done"],
        1,
        "already exists",
    ),
    ("unknown-command", ["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ("missing-option", ["prune"], 2, "--keep-terminal"),
    ("bad-int-option", ["ps", "--limit", "many"], 2, "invalid int value"),
    ("negative-keep", ["prune", "--keep-terminal", "-1"], 2, ">= 0"),
    (
        "submit-timeout-without-wait",
        ["submit", "add", "--tasks", TASKS, "--arg", "a=1", "--timeout", "5"],
        2,
        "--timeout needs --wait",
    ),
]


def _assert_one_line_error(result: Result, code: int, fragment: str) -> None:
    assert result.code == code, (result.code, result.err)
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err
    assert result.err.startswith("chongming-task: error: ")
    assert fragment in result.err, result.err
    assert result.out == ""


@pytest.fixture
def seeded(cli: Cli, db: str) -> str:
    """``db`` holding one finished task ``done``."""
    result = cli("--db", db, "run", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "done")
    assert result.code == 0, result.err
    return db


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_user_error_in_process(
    invoke: Invoke, tmp_path: Path, argv: list[str], code: int, fragment: str
) -> None:
    db = str(tmp_path / "seeded.db")
    seed = invoke("--db", db, "run", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "done")
    assert seed.code == 0, seed.err
    before = store_dump(db)
    _assert_one_line_error(invoke("--db", db, *argv), code, fragment)
    assert store_dump(db) == before


def test_every_user_error_with_the_console_script(cli: Cli, seeded: str) -> None:
    """The same table through the real script, on SQLite and PostgreSQL."""
    before = store_dump(seeded)
    for name, argv, code, fragment in CASES:
        result = cli("--db", seeded, *argv)
        try:
            _assert_one_line_error(result, code, fragment)
        except AssertionError as exc:
            raise AssertionError(f"case {name}: {exc}") from None
        assert store_dump(seeded) == before, f"case {name} changed the store"


def test_missing_sqlite_file_is_not_created(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    for argv in (["ps"], ["status", "x"], ["stats"], ["stop", "x"], ["reconcile"]):
        _assert_one_line_error(cli("--db", str(db), *argv), 1, "no database at")
    assert not db.exists()


def test_sqlite_path_is_a_directory(cli: Cli, tmp_path: Path) -> None:
    _assert_one_line_error(cli("--db", str(tmp_path), "ps"), 1, "is a directory")


def test_file_that_is_not_a_database(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("not a database\n")
    _assert_one_line_error(cli("--db", str(path), "ps"), 1, "file is not a database")
    assert path.read_text() == "not a database\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_database(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "locked.db")
    assert cli("--db", db, "run", "add", "--tasks", TASKS, "--arg", "a=1").code == 0
    os.chmod(db, 0)
    try:
        _assert_one_line_error(cli("--db", db, "ps"), 1, "database error")
    finally:
        os.chmod(db, 0o600)


def test_unreachable_postgres(cli: Cli) -> None:
    result = cli("--db", "postgresql://postgres@127.0.0.1:1/test", "ps", timeout=30)
    _assert_one_line_error(result, 1, "database error")


@pytest.mark.external_service
def test_postgres_unknown_database(cli: Cli, postgres_dsn: str) -> None:
    base = postgres_dsn.split("?", maxsplit=1)[0].rsplit("/", 1)[0]
    result = cli("--dsn", f"{base}/no_such_database_here", "ps", timeout=30)
    _assert_one_line_error(result, 1, "no_such_database_here")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--db", "a.db", "--dsn", "postgresql://x/y", "ps"], "either --db or --dsn"),
        (["--dsn", "a.db", "ps"], "--dsn must be a postgresql:// URL"),
    ],
)
def test_contradictory_database_options(cli: Cli, argv: list[str], fragment: str) -> None:
    _assert_one_line_error(cli(*argv), 2, fragment)
