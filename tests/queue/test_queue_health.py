"""queue_health (``chongming-task health``, ``workers``, the dashboard, the metrics) on
every store: the depth and oldest age per bucket are the store's whole queue, however
long, from ``TaskStore.waiting_work`` (no queued task decoded on the SQL stores)."""

from __future__ import annotations

from datetime import timedelta

from chongming_task._model import TaskSnapshot
from chongming_task.states import TaskStatus
from chongming_task.stores import QueueStore
from chongming_task.stores._base import TaskStore
from chongming_task.stores._queue_health import queue_health
from chongming_task.stores._queue_records import RECIPE_KEY, Recipe, WorkerRecord

S = TaskStatus
#: More than the 10,000 queued tasks queue_health used to read (and cap its depth at).
LONG = 10_050


def test_the_depth_counts_the_whole_queue_and_the_age_its_oldest_task(store: TaskStore) -> None:
    assert isinstance(store, QueueStore)
    now = store.clock.now()
    recipe = {RECIPE_KEY: Recipe(args=(1,)).to_dict()}

    def queued(task_id: str, bucket: int | None, age: float, **changes: object) -> TaskSnapshot:
        at = now - timedelta(seconds=age)
        fields: dict[str, object] = {
            "task_id": task_id,
            "name": "job",
            "status": S.QUEUED,
            "status_version": 1,
            "created_at": at,
            "updated_at": at,
            "queued_at": at,
            "bucket": bucket,
            "metadata": recipe,
        }
        fields.update(changes)
        return TaskSnapshot(**fields)  # type: ignore[arg-type]

    # Bucket 1: a long queue, its oldest task 600 s old; bucket 2: one task a live
    # worker owns; no bucket: one; and queued tasks that are not waiting for a worker.
    long_queue = [queued(f"q{n:05}", 1, 600 - n * 0.01) for n in range(LONG)]
    store.create_many(
        [
            *long_queue,
            queued("owned", 2, 30),
            queued("loose", None, 5),
            queued("held", 3, 900, owner="w0"),
            queued("in-process", 3, 900, metadata={}),
        ]
    )
    store.put_worker(
        WorkerRecord(
            worker_id="w1",
            host="h",
            pid=1,
            version="1",
            buckets=(2,),
            slots=1,
            started_at=now,
            heartbeat_at=now,
        )
    )
    health = queue_health(store, now)
    assert health.depth == {"1": LONG, "2": 1, "-": 1}
    assert health.oldest_age == {"1": 600.0, "2": 30.0, "-": 5.0}
    assert health.orphaned == ("1", "-")  # bucket 2 has a live owner; in numeric order
    assert health.problems == [
        f"bucket 1 has {LONG} queued task(s) and no live worker owning it",
        "bucket - has 1 queued task(s) and no live worker owning it",
    ]
