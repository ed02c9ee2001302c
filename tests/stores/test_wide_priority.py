"""A priority is a signed 64-bit integer on every store, as the API promises.

PostgreSQL kept ``ct_tasks.priority`` as a 32-bit ``integer`` until schema version 11:
a priority beyond 32 bits was accepted by ``submit``/``enqueue`` and then refused by
the insert, so the task was never stored while the caller held its handle.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from chongming_task import Controller, TaskContext, TaskStatus
from chongming_task.queue import Client
from chongming_task.stores._base import TaskStore
from chongming_task.stores._queue_store import QueueStore

WIDE = (2**40, -(2**62), 2**63 - 1, -(2**63))


def job(ctx: TaskContext) -> str:
    return "done"


@pytest.mark.parametrize("priority", WIDE)
def test_a_wide_priority_is_stored_by_submit(store: TaskStore, priority: int) -> None:
    with Controller(store) as controller:
        controller.register("job", job)
        handle = controller.submit("job", priority=priority)
        assert handle.wait(30).status is TaskStatus.SUCCEEDED
    stored = store.get(handle.task_id)
    assert stored is not None
    assert stored.priority == priority
    assert stored.status is TaskStatus.SUCCEEDED


def test_wide_priorities_are_enqueued_and_claimed_highest_first(store: TaskStore) -> None:
    assert isinstance(store, QueueStore)
    client = Client(store)
    ids = {p: client.enqueue("job", priority=p).task_id for p in (0, *WIDE)}
    for priority, task_id in ids.items():
        stored = store.get(task_id)
        assert stored is not None
        assert stored.priority == priority
    until = store.clock.now() + timedelta(seconds=30)
    claimed = store.claim_queued("w1", buckets=None, limit=len(ids), lease_until=until)
    assert [s.priority for s in claimed] == sorted(ids, reverse=True)
