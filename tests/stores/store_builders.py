"""Snapshot and transition builders shared by the backend-specific store tests."""

from __future__ import annotations

from datetime import UTC, datetime

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.states import TaskStatus

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def snap(task_id: str = "t1", **changes: object) -> TaskSnapshot:
    """A pending snapshot at version 0, with ``changes`` applied."""
    fields: dict[str, object] = {
        "task_id": task_id,
        "name": "job",
        "status": TaskStatus.PENDING,
        "status_version": 0,
        "created_at": NOW,
        "updated_at": NOW,
    }
    fields.update(changes)
    return TaskSnapshot(**fields)  # type: ignore[arg-type]


def step(task_id: str, version: int, to: TaskStatus) -> Transition:
    """A history record of ``task_id`` reaching ``to`` at ``version``."""
    return Transition(
        task_id=task_id, from_status=None, to_status=to, trigger="t:x", version=version, at=NOW
    )
