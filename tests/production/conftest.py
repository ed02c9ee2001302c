"""Helpers of the production-readiness tests: a SQLite file seeded with finished tasks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.states import TaskStatus
from chongming_task.stores._sqlite import SqliteTaskStore

#: When the seeded tasks were created: long enough ago for every retention test.
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)

Seed = Callable[..., str]


def finished(
    task_id: str, at: datetime, status: TaskStatus = TaskStatus.SUCCEEDED
) -> tuple[TaskSnapshot, list[Transition]]:
    """A task that ran and ended with ``status`` at ``at``, with its three transitions."""
    snapshot = TaskSnapshot(
        task_id=task_id,
        name="job",
        status=status,
        status_version=3,
        created_at=at,
        updated_at=at,
        finished_at=at,
    )
    steps = [(None, TaskStatus.PENDING), (TaskStatus.PENDING, TaskStatus.RUNNING)]
    steps.append((TaskStatus.RUNNING, status))
    transitions = [
        Transition(
            task_id=task_id,
            from_status=source,
            to_status=target,
            version=version,
            at=at,
            trigger="test",
        )
        for version, (source, target) in enumerate(steps, start=1)
    ]
    return snapshot, transitions


@pytest.fixture
def seed(tmp_path: Path) -> Seed:
    """``seed(n, age=timedelta, status=...)`` -> the path of a SQLite file with n more tasks."""
    path = str(tmp_path / "big.db")
    counter = [0]

    def add(
        count: int,
        *,
        age: timedelta = timedelta(days=30),
        status: TaskStatus = TaskStatus.SUCCEEDED,
        prefix: str = "t",
    ) -> str:
        store = SqliteTaskStore(path)
        try:
            now = datetime.now(UTC)
            for _ in range(count):
                counter[0] += 1
                at = now - age + timedelta(milliseconds=counter[0])
                snapshot, transitions = finished(f"{prefix}{counter[0]:04d}", at, status)
                store.create(snapshot, transitions)
        finally:
            store.close()
        return path

    return add
