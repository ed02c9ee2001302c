"""The whole store's counts (the dashboard's overview, unfiltered list and buckets page,
the live fingerprint) on every store: the SQL stores sum the finished tasks' counts
that triggers keep and count the unfinished tasks in place; a filtered count scans.
Both must agree with the tasks there are after every kind of write."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from store_builders import NOW, snap

from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery, TaskStore

S = TaskStatus
EVERY = TaskQuery(statuses=frozenset(TaskStatus))


def assert_exact(store: TaskStore) -> None:
    """The whole store's counts equal what counting every task finds."""
    tasks = store.query()
    statuses: dict[TaskStatus, int] = {}
    buckets: dict[int, int] = {}
    for task in tasks:
        statuses[task.status] = statuses.get(task.status, 0) + 1
        if task.bucket is not None:
            buckets[task.bucket] = buckets.get(task.bucket, 0) + 1
    assert store.count_by_status() == statuses
    assert store.count_by_status(EVERY) == statuses  # the counting path
    assert store.count_by_bucket() == buckets
    assert store.count_tasks() == len(tasks)


def moved(store: TaskStore, task_id: str, **changes: Any) -> None:
    """Save ``task_id`` with ``changes``, its version moved on by one."""
    stored = store.get(task_id)
    assert stored is not None
    version = stored.status_version
    store.save(replace(stored, status_version=version + 1, **changes), expect_version=version)


def test_the_whole_store_counts_follow_every_write(store: TaskStore) -> None:
    assert_exact(store)
    for n in range(12):
        store.create(snap(f"t{n}", bucket=n % 3 if n % 4 else None))
    store.create_many(
        [snap(f"done-{n}", status=S.SUCCEEDED, bucket=n % 2) for n in range(6)]
        + [snap("failed", status=S.FAILED), snap("lost", status=S.LOST, bucket=5)]
    )
    assert_exact(store)
    moved(store, "t1", status=S.RUNNING)
    moved(store, "t1", status=S.SUCCEEDED)  # finishes
    moved(store, "t2", status=S.STOPPED)
    moved(store, "failed", status=S.QUEUED)  # a retry leaves a terminal status
    moved(store, "done-0", bucket=7)  # a finished task moved to another bucket
    moved(store, "done-1", bucket=None)
    moved(store, "t3", status=S.SUCCEEDED, bucket=1)  # finishes and moves at once
    store.touch("t1", heartbeat_at=NOW)  # the side channel changes no count
    assert_exact(store)
    assert store.delete_tasks(["done-2", "t0", "lost"]) == 3
    assert_exact(store)
    assert store.prune(keep_terminal=2) > 0
    assert_exact(store)
    assert store.count_tasks(TaskQuery(statuses=frozenset({S.SUCCEEDED}))) == sum(
        1 for t in store.query() if t.status is S.SUCCEEDED
    )
