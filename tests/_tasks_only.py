"""``TasksOnlyStore``: a third-party backend with the task part only, for tests.

It is ``DictTaskRecords`` of ``examples/07_custom_store.py``: it implements
:class:`TaskRecordStore` and nothing else (no commands, no schedules, no work queue),
as a backend over a key-value service might. tests/stores/test_tasks_only_store.py
checks its contract and what refuses it; the dashboard and metrics tests check that
what reads a store degrades on it instead of failing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from _custom_example import example
from chongming_task._model import TaskSnapshot
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskRecordStore

__all__ = ["TasksOnlyStore", "held_elsewhere"]

TasksOnlyStore: type[TaskRecordStore] = example.DictTaskRecords


def held_elsewhere(task_id: str, now: datetime, *, holder: str = "node-b") -> TaskSnapshot:
    """A task ``running`` under another process's lease (what only a command can reach)."""
    when: dict[str, Any] = {"created_at": now, "updated_at": now, "status_version": 3}
    running = TaskSnapshot(task_id=task_id, name="spin", status=TaskStatus.RUNNING, **when)
    return running.replace(owner=holder, lease_owner=holder)
