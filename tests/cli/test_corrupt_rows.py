"""One corrupted row never takes a command down: ``ps``, ``stats``, ``schedules`` and
``health`` skip it with a warning naming its task id (``ps`` lists it as corrupt);
a direct read raises ``StoreError`` naming the row."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from chongming_task import Controller
from chongming_task.errors import StoreError
from chongming_task.schedule import Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.stores._base import CorruptRows
from chongming_task.stores._sqlite import SqliteTaskStore

from .conftest import Result

Invoke = Callable[..., Result]

BREAKS = {
    "unknown status": "UPDATE ct_tasks SET status = 'exploded', "
    "doc = json_set(doc, '$.status', 'exploded') WHERE task_id = 'bad'",
    "invalid JSON": "UPDATE ct_tasks SET doc = '{not json' WHERE task_id = 'bad'",
}


def _seed(db: Path, breakage: str) -> None:
    with SqliteTaskStore(db) as store:
        controller = Controller(store=store)
        controller.register("add", lambda ctx: 1)
        for task_id in ("good-1", "bad", "good-2"):
            meta = {"schedule": "nightly"}
            assert controller.submit("add", task_id=task_id, metadata=meta).wait(10).ok
        # A string trigger is a UTC cron (Schedule.trigger's type does not say so yet).
        ScheduleAdmin(store).register(Schedule(name="nightly", task="add", trigger="0 3 * * *"))  # type: ignore[arg-type]
        controller.close()
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(BREAKS[breakage])
    conn.close()


@pytest.mark.parametrize("breakage", list(BREAKS))
def test_listings_skip_a_corrupt_row_with_a_warning_naming_it(
    invoke: Invoke, tmp_path: Path, breakage: str
) -> None:
    db = tmp_path / "tasks.db"
    _seed(db, breakage)
    ps = invoke("--db", str(db), "ps")
    assert ps.code == 0, ps.err
    assert "'bad'" in ps.err
    assert "good-1" in ps.out
    assert "good-2" in ps.out
    assert "bad  corrupt" in ps.out
    doc = invoke("--db", str(db), "ps", "--json").json()
    assert [t["task_id"] for t in doc["tasks"]] == ["good-2", "good-1"]  # newest first
    assert doc["total"] == 3  # the corrupt row counts among the matches
    assert [c["task_id"] for c in doc["corrupt"]] == ["bad"]
    for command in ("stats", "schedules", "health"):
        result = invoke("--db", str(db), command)
        assert result.code == 0, (command, result.err)
        assert "internal error" not in result.err
        assert "Traceback" not in result.err
    stats = invoke("--db", str(db), "stats")
    assert "succeeded" in stats.out
    status = invoke("--db", str(db), "status", "bad")
    assert status.code == 1
    assert "corrupt task row 'bad'" in status.err


@pytest.mark.parametrize("breakage", list(BREAKS))
def test_a_direct_read_raises_store_error_naming_the_row(tmp_path: Path, breakage: str) -> None:
    db = tmp_path / "tasks.db"
    _seed(db, breakage)
    with SqliteTaskStore(db) as store:
        with pytest.raises(StoreError, match="corrupt task row 'bad'") as caught:
            store.get("bad")
        assert isinstance(caught.value, CorruptRows)
        assert list(caught.value.corrupt) == ["bad"]
        assert store.get("good-1") is not None
        with pytest.raises(CorruptRows) as listed:
            store.query()
        assert [s.task_id for s in listed.value.snapshots] == ["good-1", "good-2"]
        # The scheduler's views skip it too.
        runs = ScheduleAdmin(store).runs("nightly")
        assert sorted(s.task_id for s in runs) == ["good-1", "good-2"]
