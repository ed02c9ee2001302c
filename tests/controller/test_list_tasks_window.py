"""``list_tasks(created_after=..., created_before=...)`` on the controller and the client,
on every store: a half-open window of creation (or last-write) times."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from chongming_task import Client, Controller
from chongming_task.errors import ConfigurationError
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock

START = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def job(ctx: Any) -> None:
    """Never run here: the tasks stay queued."""


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def clocked(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[TaskStore, FakeClock]]:
    clock = FakeClock(START)
    if request.param == "memory":
        from chongming_task.stores._memory import InMemoryTaskStore

        store: TaskStore = InMemoryTaskStore(clock=clock)
    elif request.param == "sqlite":
        from chongming_task.stores._sqlite import SqliteTaskStore

        store = SqliteTaskStore(str(tmp_path / "t.db"), clock=clock)
    else:
        from chongming_task.stores._postgres import PostgresTaskStore

        store = PostgresTaskStore(request.getfixturevalue("postgres_dsn"), clock=clock)
    try:
        yield store, clock
    finally:
        store.close()


def test_controller_and_client_list_a_creation_window(
    clocked: tuple[TaskStore, FakeClock],
) -> None:
    store, clock = clocked
    client = Client(store, tasks=[job])
    made = {}
    for minute in (0, 10, 20, 30):
        made[minute] = client.enqueue("job", task_id=f"m{minute}").task_id
        clock.advance(600)
    controller = Controller(store, owner="reader")
    try:
        window: dict[str, Any] = {
            "created_after": START + timedelta(minutes=10),
            "created_before": START + timedelta(minutes=30),
        }
        for lister in (controller.list_tasks, client.list_tasks):
            assert [s.task_id for s in lister(**window)] == ["m10", "m20"]
            newest = lister(created_after=START + timedelta(minutes=10), order="-created", limit=2)
            assert [s.task_id for s in newest] == ["m30", "m20"]
            # The bound is an instant: the same one in another offset selects the same.
            east = (START + timedelta(minutes=20)).astimezone(timezone(timedelta(hours=8)))
            assert [s.task_id for s in lister(created_before=east)] == ["m0", "m10"]
            assert [s.task_id for s in lister(status="queued", **window)] == ["m10", "m20"]
            assert lister(created_after=START + timedelta(hours=1)) == []
        # A write moves a task's updated_at into a window; creation stays where it was.
        assert client.stop("m0", reason="not needed") is True
        recent: dict[str, Any] = {"updated_after": clock.now()}
        assert [s.task_id for s in controller.list_tasks(**recent)] == ["m0"]
        assert [s.task_id for s in client.list_tasks(updated_before=clock.now())] == [
            "m10",
            "m20",
            "m30",
        ]
    finally:
        controller.close()


def test_naive_bounds_are_refused(clocked: tuple[TaskStore, FakeClock]) -> None:
    store, _ = clocked
    controller = Controller(store, owner="reader")
    try:
        with pytest.raises(ConfigurationError, match="created_after must be a timezone-aware"):
            controller.list_tasks(created_after=datetime(2026, 1, 1))
        with pytest.raises(ConfigurationError, match="updated_before"):
            Client(store).list_tasks(updated_before="2026-01-01")  # type: ignore[arg-type]
    finally:
        controller.close()
