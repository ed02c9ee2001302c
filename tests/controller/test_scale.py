"""10,000 no-op tasks through max_parallel=4 with named limits and buckets: nothing leaks."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from chongming_task import ConcurrencyPolicy, Controller, TaskContext
from chongming_task._model import TaskSnapshot, Transition
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._sqlite import SqliteTaskStore

pytestmark = pytest.mark.timeout(120)

S = TaskStatus
COUNT = 10_000
LIMITS = {"db": 2, "gpu": 1}
MAX_PARALLEL = 4
PER_BUCKET = 2


def noop(ctx: TaskContext, index: int) -> int:
    return index


@pytest.mark.parametrize(
    ("kind", "count"),
    # SQLite pays a commit per transition (about 1.5 ms per task here): fewer tasks.
    [("memory", COUNT), ("sqlite", COUNT // 10)],
)
def test_ten_thousand_tasks_leave_no_slot_behind(kind: str, count: int, tmp_path: Path) -> None:
    store: TaskStore = (
        InMemoryTaskStore() if kind == "memory" else SqliteTaskStore(tmp_path / "t.db")
    )
    with store:
        controller = Controller(
            store=store,
            concurrency=ConcurrencyPolicy(max_parallel=MAX_PARALLEL, limits=LIMITS),
            max_parallel_per_bucket=PER_BUCKET,
        )
        controller.register("noop", noop)
        # Watch the ledger at every start: no limit is ever exceeded.
        peaks: Counter[str] = Counter()
        active: dict[str, TaskSnapshot] = {}

        lock = threading.Lock()  # inline subscribers run in every transitioning thread

        def watch(transition: Transition, snapshot: TaskSnapshot) -> None:
            with lock:
                _watch(transition, snapshot)

        def _watch(transition: Transition, snapshot: TaskSnapshot) -> None:
            if transition.to_status is S.STARTING:
                active[snapshot.task_id] = snapshot
                peaks["all"] = max(peaks["all"], len(active))
                for tag in LIMITS:
                    using = sum(1 for s in active.values() if tag in s.tags)
                    peaks[tag] = max(peaks[tag], using)
                in_bucket = sum(1 for s in active.values() if s.bucket == snapshot.bucket)
                peaks["bucket"] = max(peaks["bucket"], in_bucket)
            elif transition.to_status.is_terminal:
                active.pop(snapshot.task_id, None)

        # Inline, so the check sees the ledger before a freed slot is handed on.
        controller.subscribe(watch, inline=True)
        for index in range(count):
            tags = ["db"] if index % 3 == 0 else ["gpu"] if index % 7 == 0 else []
            controller.submit("noop", index, tags=tags, bucket_key=f"tenant-{index % 40}")
        outcomes = controller.wait_all(timeout=100)

        assert len(outcomes) == count
        assert all(outcome.ok for outcome in outcomes)
        assert controller.active_count == 0
        assert controller.queued_count == 0
        assert all(controller.active_in_bucket(b) == 0 for b in range(64))
        assert peaks["all"] <= MAX_PARALLEL
        assert peaks["db"] <= LIMITS["db"]
        assert peaks["gpu"] <= LIMITS["gpu"]
        assert peaks["bucket"] <= PER_BUCKET
        # The store agrees with memory.
        in_memory = Counter(run.status for run in controller.runs())
        assert in_memory == Counter({S.SUCCEEDED: count})
        assert controller.stats().by_status[S.SUCCEEDED] == count
        assert controller.stats().unfinished == 0
        assert sum(controller.bucket_counts().values()) == count
        assert not controller.persist_failures
        sample = controller.runs()[count // 2]
        assert [t.to_status.value for t in store.history(sample.task_id)] == [
            "pending",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]
        controller.close()
