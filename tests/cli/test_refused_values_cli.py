"""Values the store could not keep are usage errors (exit 2) on the command line,
named with their limit -- never "internal error", never a hang."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import TASKS, Result, store_dump

Invoke = Callable[..., Result]

DEEP = "[" * 5000 + "]" * 5000

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
