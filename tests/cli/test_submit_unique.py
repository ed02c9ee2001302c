"""``submit --unique-key K [--unique-for DURATION]``: one task per key, on SQLite and
PostgreSQL; a second submit prints the standing task's id, ``--json`` says ``created``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_task import Client, TaskStatus
from chongming_task.stores._base import TaskQuery

from .conftest import TASKS, Result, peek_status, store_dump


def client_of(db: str) -> Client:
    from _store_spec import open_store

    return Client(open_store(("postgres:" if db.startswith("postgresql") else "sqlite:") + db))


def test_a_second_submit_with_the_key_prints_the_first_task(
    db: str, invoke: Callable[..., Result]
) -> None:
    base = ("--db", db, "submit", "add", "--tasks", TASKS, "--arg", "a=1", "--json")
    first = invoke(*base, "--unique-key", "nightly")
    assert first.code == 0, first.err
    second = invoke(*base, "--unique-key", "nightly", "--task-id", "other")
    assert second.code == 0, second.err
    assert first.json()["created"] is True
    assert second.json()["created"] is False
    task_id = first.json()["task_id"]
    assert second.json()["task_id"] == task_id
    assert peek_status(db, task_id) == "queued"
    text = invoke(*base[:-1], "--unique-key", "nightly")  # without --json: the id alone
    assert (text.code, text.out.strip()) == (0, task_id)
    client = client_of(db)
    with client.store:
        tasks = client.store.query(TaskQuery())
        assert [t.task_id for t in tasks] == [task_id]
        assert tasks[0].metadata["unique_key"] == "nightly"
        # Finished: a plain --unique-key creates again; --unique-for 1h still counts it.
        assert client.stop(task_id)
        held = invoke(*base, "--unique-key", "nightly", "--unique-for", "1h")
        assert (held.json()["task_id"], held.json()["created"]) == (task_id, False)
        fresh = invoke(*base, "--unique-key", "nightly")
        assert fresh.json()["created"] is True
        created = client.store.get(fresh.json()["task_id"])
        assert created is not None
        assert created.status is TaskStatus.QUEUED


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--unique-for", "1h"), "--unique-for needs --unique-key"),
        (("--unique-key", ""), "unique_key must be a non-empty string"),
        (("--unique-key", "k", "--unique-for", "0"), "must be > 0"),
        (("--unique-key", "k", "--unique-for", "soon"), "is not an age"),
        (("--unique-key", "k", "--unique-for=-5m"), "is not an age"),
        (("--arg", "unique_key=k"), "set it with --unique-key"),
    ],
)
def test_bad_unique_options_exit_2_and_write_nothing(
    invoke: Callable[..., Result], tmp_path: Path, options: tuple[str, ...], message: str
) -> None:
    db = str(tmp_path / "tasks.db")
    result = invoke("--db", db, "submit", "add", "--tasks", TASKS, "--arg", "a=1", *options)
    assert result.code == 2, (result.out, result.err)
    assert message in result.err
    assert len(result.err_lines) == 1, result.err
    assert "Traceback" not in result.err
    assert store_dump(db) is None  # refused before the store was opened
