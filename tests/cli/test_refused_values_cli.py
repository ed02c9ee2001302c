"""Values the store could not keep are usage errors (exit 2) on the command line,
named with their limit -- never "internal error", never a hang."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import TASKS, Result, store_dump

Invoke = Callable[..., Result]

DEEP = "[" * 5000 + "]" * 5000
#: An object nested 2,000 deep: json.loads itself recursed into RecursionError.
DEEP_OBJECT = '{"a": ' + "[" * 2000 + "]" * 2000 + "}"

CASES: list[tuple[str, list[str], str]] = [
    ("worker --lease-ttl nan", ["worker", "--tasks", TASKS, "--lease-ttl", "nan"], "--lease-ttl"),
    (
        "worker --shutdown-timeout nan",
        ["worker", "--tasks", TASKS, "--shutdown-timeout", "nan"],
        "--shutdown-timeout",
    ),
    (
        "worker --poll-interval nan",
        ["worker", "--tasks", TASKS, "--poll-interval", "nan"],
        "--poll-interval",
    ),
    ("worker --lease-ttl inf", ["worker", "--tasks", TASKS, "--lease-ttl", "inf"], "finite"),
    ("ps --watch --interval nan", ["ps", "--watch", "--interval", "nan"], "--interval"),
    (
        "submit --wait --timeout nan",
        ["submit", "add", "--tasks", TASKS, "--arg", "a=1", "--wait", "--timeout", "nan"],
        "--timeout",
    ),
    ("schedule run --wait nan", ["schedule", "run", "nightly", "--wait", "nan"], "--wait"),
    (
        "prune --keep-terminal huge",
        ["prune", "--keep-terminal", "99999999999999999999"],
        "9223372036854775807",
    ),
    (
        "submit --priority 2**63",
        ["submit", "add", "--tasks", TASKS, "--arg", "a=1", "--priority", str(2**63)],
        "--priority",
    ),
    (
        "schedule set @every 100000000h",
        ["schedule", "set", "nightly", "@every 100000000h"],
        "at most",
    ),
    ("--arg nested 5000 deep", ["submit", "add", "--tasks", TASKS, "--arg", f"a={DEEP}"], "100"),
    ("non-UTF-8 argument", ["submit", "add", "--tasks", TASKS, "--arg", "a=\udcff"], "UTF-8"),
    ("non-UTF-8 task name", ["submit", "ad\udcffd", "--tasks", TASKS], "UTF-8"),
    ("prune --older-than 11 digits", ["prune", "--older-than", "99999999999"], "100 years"),
    ("prune --older-than 2**63-1", ["prune", "--older-than", str(2**63 - 1)], "100 years"),
    ("prune --older-than 400 digits", ["prune", "--older-than", "9" * 400 + "d"], "100 years"),
    (
        "worker --keep-finished-for huge",
        ["worker", "--tasks", TASKS, "--keep-finished-for", "99999999999999"],
        "100 years",
    ),
    (
        "schedule set @every 5000 digits",
        ["schedule", "set", "nightly", f"@every {'9' * 5000}s"],
        "100 years",
    ),
    (
        "submit --args-json nested 2000 deep",
        ["submit", "add", "--tasks", TASKS, "--args-json", DEEP_OBJECT],
        "deeper than 100",
    ),
    (
        "schedule run --input nested 2000 deep",
        ["schedule", "run", "nightly", "--input", DEEP_OBJECT],
        "deeper than 100",
    ),
    ("schedule run --input NaN", ["schedule", "run", "nightly", "--input", '{"a": NaN}'], "NaN"),
    ("dashboard --live-interval nan", ["dashboard", "--live-interval", "nan"], "--live-interval"),
    ("dashboard --live-interval inf", ["dashboard", "--live-interval", "inf"], "finite"),
    ("dashboard --live-interval 1e309", ["dashboard", "--live-interval", "1e309"], "finite"),
    (
        "buckets handoff --timeout nan",
        ["buckets", "handoff", "--from", "a", "--to", "b", "--timeout", "nan", "0"],
        "--timeout",
    ),
    (
        "task id too long",
        ["submit", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "x" * 300],
        "256",
    ),
]


@pytest.mark.parametrize(("argv", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_values_are_usage_errors(
    invoke: Invoke, tmp_path: Path, argv: list[str], fragment: str
) -> None:
    db = str(tmp_path / "seeded.db")
    seed = invoke("--db", db, "run", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "done")
    assert seed.code == 0, seed.err
    from chongming_task.schedule import Schedule
    from chongming_task.schedule._admin import ScheduleAdmin
    from chongming_task.stores._sqlite import SqliteTaskStore

    with SqliteTaskStore(db) as store:
        # A string trigger is a UTC cron (Schedule.trigger's type does not say so yet).
        ScheduleAdmin(store).register(Schedule(name="nightly", task="add", trigger="0 3 * * *"))  # type: ignore[arg-type]
    before = store_dump(db)
    result = invoke("--db", db, *argv)
    assert result.code == 2, result.err
    assert "internal error" not in result.err
    assert "Traceback" not in result.err
    assert fragment in result.err
    assert len(result.err_lines) == 1
    assert store_dump(db) == before  # nothing was written


#: Every command that opens the store, with what it needs to get that far.
STORE_COMMANDS: list[list[str]] = [
    ["ps"], ["status", "x"], ["history", "x"], ["stats"], ["buckets"], ["explain", "x"],
    ["stop", "x"], ["pause", "x"], ["resume", "x"], ["reconcile"], ["prune", "--keep-terminal",
    "1"], ["prune", "--older-than", "1d"], ["schedules"], ["health"], ["workers"],
    ["schedule", "show", "nightly"], ["tasks", "--tasks", TASKS, "--checkpoints"],
    ["run", "add", "--tasks", TASKS, "--arg", "a=1"],
    ["submit", "add", "--tasks", TASKS, "--arg", "a=1"],
    ["worker", "--tasks", TASKS], ["dashboard"], ["buckets", "--owners"],
]  # fmt: skip


def _set_schema_version(db: str, value: object) -> None:
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("UPDATE ct_meta SET value = %s WHERE key = 'schema_version'", (value,))
        return
    import sqlite3

    lite = sqlite3.connect(db)
    try:
        lite.execute("UPDATE ct_meta SET value = ? WHERE key = 'schema_version'", (value,))
        lite.commit()
    finally:
        lite.close()


@pytest.mark.parametrize("argv", STORE_COMMANDS, ids=[" ".join(c[:2]) for c in STORE_COMMANDS])
def test_a_schema_version_that_is_not_a_number_is_a_store_error(
    db: str, invoke: Invoke, argv: list[str]
) -> None:
    # ``db`` first: ``invoke`` clears CHONGMING_* (CHONGMING_TEST_POSTGRES too) from the
    # environment once the database is chosen.
    seed = invoke("--db", db, "run", "add", "--tasks", TASKS, "--arg", "a=1", "--task-id", "x")
    assert seed.code == 0, seed.err
    # PostgreSQL keeps a bigint there: a negative one is its "not a version".
    bad: object = -1 if db.startswith("postgresql://") else "abc"
    _set_schema_version(db, bad)
    before = store_dump(db)
    result = invoke("--db", db, *argv)
    assert result.code == 1, (result.code, result.err)
    assert "internal error" not in result.err
    assert f"schema version {str(bad)!r}, which is not a version number" in result.err
    assert len(result.err_lines) == 1, result.err
    assert store_dump(db) == before


@pytest.mark.parametrize("bad", [2.5, -3, "", "seven"])
def test_every_malformed_sqlite_schema_version_is_named(
    invoke: Invoke, tmp_path: Path, bad: object
) -> None:
    db = str(tmp_path / "t.db")
    assert invoke("--db", db, "run", "add", "--tasks", TASKS, "--arg", "a=1").code == 0
    _set_schema_version(db, bad)
    for argv in (["ps"], ["submit", "add", "--tasks", TASKS, "--arg", "a=1"]):
        result = invoke("--db", db, *argv)
        assert result.code == 1, result.err
        assert "not a version number" in result.err
