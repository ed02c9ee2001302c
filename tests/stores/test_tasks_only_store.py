"""A third-party backend with the task part only: its contract, and what refuses it.

``TasksOnlyStore`` implements :class:`TaskRecordStore` and nothing else (no commands,
no schedules, no work queue), as a backend over a key-value service might. It passes
``TaskRecordStoreContract``; a controller on it runs, stops and waits for its own
tasks; every feature that needs another part refuses it with a ``ConfigurationError``
naming the part, before anything is written.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

import pytest

from chongming_task import (
    ConcurrencyConflict,
    ConfigurationError,
    Controller,
    StoreError,
    TaskContext,
)
from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._model import Progress, TaskSnapshot, Transition
from chongming_task.core._clock import Clock
from chongming_task.schedule import Scheduler
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores._base import (
    CommandStore,
    QueueStore,
    ScheduleStore,
    TaskNotFound,
    TaskQuery,
    TaskRecordStore,
    TaskStore,
)
from chongming_task.stores._codec import check_outcome, require_aware
from chongming_task.testing import wait_until
from chongming_task.testing.store_contract import TaskRecordStoreContract
from chongming_task.worker import Worker

_ORDERS: dict[str, Any] = {
    "created": (lambda s, n: (s.created_at, n), False),
    "-created": (lambda s, n: (s.created_at, n), True),
    "updated": (lambda s, n: (s.updated_at, n), False),
    "-updated": (lambda s, n: (s.updated_at, n), True),
    "priority": (lambda s, n: (-s.priority, s.created_at, n), False),
}


class TasksOnlyStore(TaskRecordStore):
    """Snapshots and history in dictionaries behind one lock; the task part, no more."""

    keeps_checkpoint_gaps = True

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._lock = threading.Lock()
        self._tasks: dict[str, tuple[int, TaskSnapshot]] = {}
        self._history: dict[str, dict[int, Transition]] = {}
        self._seq = 0
        self._closed = False

    def _open(self) -> None:
        if self._closed:
            raise StoreError("TasksOnlyStore is closed")

    def _add(self, transitions: Sequence[Transition]) -> None:
        for t in transitions:
            self._history.setdefault(t.task_id, {}).setdefault(t.version, t)

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        check_outcome(snapshot.outcome, snapshot.task_id)
        with self._lock:
            self._open()
            if snapshot.task_id in self._tasks:
                raise ConfigurationError(f"task id {snapshot.task_id!r} already exists")
            self._seq += 1
            self._tasks[snapshot.task_id] = (self._seq, snapshot)
            self._add(transitions)

    def save(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        check_outcome(snapshot.outcome, snapshot.task_id)
        with self._lock:
            self._open()
            row = self._tasks.get(snapshot.task_id)
            if row is None:
                raise TaskNotFound(snapshot.task_id)
            if row[1].status_version != expect_version:
                raise ConcurrencyConflict(snapshot.task_id, expect_version, row[1].status_version)
            self._tasks[snapshot.task_id] = (row[0], snapshot)
            self._add(transitions)

    def get(self, task_id: str) -> TaskSnapshot | None:
        with self._lock:
            self._open()
            row = self._tasks.get(task_id)
            return None if row is None else row[1]

    def _rows(self) -> list[tuple[int, TaskSnapshot]]:
        with self._lock:
            self._open()
            return list(self._tasks.values())

    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        key, reverse = _ORDERS[query.order]
        found = [(n, s) for n, s in self._rows() if query.matches(s)]
        found.sort(key=lambda row: key(row[1], row[0]), reverse=reverse)
        return [s for _, s in found][: query.limit]

    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        counts: dict[TaskStatus, int] = {}
        for _, s in self._rows():
            if query is None or query.matches(s):
                counts[s.status] = counts.get(s.status, 0) + 1
        return counts

    def count_by_bucket(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for _, s in self._rows():
            if s.bucket is not None:
                counts[s.bucket] = counts.get(s.bucket, 0) + 1
        return counts

    def prune(self, keep_terminal: int) -> int:
        if keep_terminal < 0:
            raise ConfigurationError("keep_terminal must be >= 0")
        done = sorted(
            ((n, s) for n, s in self._rows() if s.status in TERMINAL),
            key=lambda row: (row[1].updated_at, row[0]),
            reverse=True,
        )[keep_terminal:]
        with self._lock:
            for _, s in done:
                del self._tasks[s.task_id]
                self._history.pop(s.task_id, None)
        return len(done)

    def append(self, transition: Transition) -> None:
        with self._lock:
            self._open()
            self._add([transition])

    def history(self, task_id: str) -> list[Transition]:
        with self._lock:
            self._open()
            trail = self._history.get(task_id, {})
            return [trail[version] for version in sorted(trail)]

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
        pid: int | None = None,
        checkpoint_gaps: CheckpointGaps | None = None,
    ) -> bool:
        require_aware(heartbeat_at, "heartbeat_at")
        require_aware(lease_until, "lease_until")
        given = {
            "progress": progress,
            "last_heartbeat_at": heartbeat_at,
            "lease_owner": lease_owner,
            "lease_until": lease_until,
            "pid": pid,
            "checkpoint_gaps": checkpoint_gaps,
        }
        changes = {k: v for k, v in given.items() if v is not None}
        with self._lock:
            self._open()
            row = self._tasks.get(task_id)
            if row is None:
                return False
            self._tasks[task_id] = (row[0], row[1].replace(**changes))
            return True

    def renew_leases(self, owner: str, task_ids: Collection[str], lease_until: datetime) -> int:
        require_aware(lease_until, "lease_until")
        renewed = 0
        with self._lock:
            self._open()
            for task_id in set(task_ids):
                row = self._tasks.get(task_id)
                if row is not None and row[1].lease_owner == owner:
                    self._tasks[task_id] = (row[0], row[1].replace(lease_until=lease_until))
                    renewed += 1
        return renewed

    def close(self) -> None:
        self._closed = True


def test_it_declares_the_task_part_only() -> None:
    store = TasksOnlyStore()
    assert isinstance(store, TaskRecordStore)
    for part in (CommandStore, ScheduleStore, QueueStore, TaskStore):
        assert not isinstance(store, part)


class TestTasksOnlyStoreContract(TaskRecordStoreContract):
    """The task contract passes; the other parts' contracts are simply not run."""

    def make_store(self, clock: Clock) -> TasksOnlyStore:
        return TasksOnlyStore(clock=clock)


def _spin(ctx: TaskContext) -> None:
    idle = threading.Event()
    while True:
        ctx.checkpoint()  # where the stop lands
        idle.wait(0.01)


def _add(ctx: TaskContext, a: int, b: int) -> int:
    return a + b


@pytest.fixture
def controller() -> Iterator[Controller]:
    # Typed TaskStore where the controller takes one; at runtime only the task part
    # is there, and the controller asks before it uses anything else.
    store = cast(TaskStore, TasksOnlyStore())
    with Controller(store=store, owner="node-a") as controller:
        controller.register("add", _add)
        controller.register("spin", _spin)
        yield controller
    store.close()


def test_a_controller_runs_stops_and_waits_on_the_task_part(controller: Controller) -> None:
    done = controller.submit("add", 1, 2, task_id="sum")
    assert done.wait(10).value == 3
    spinning = controller.submit("spin", task_id="spin")
    wait_until(lambda: spinning.status is TaskStatus.RUNNING)
    assert controller.stop("spin", reason="enough")
    assert spinning.wait(10).status is TaskStatus.STOPPED
    stored = controller.store.get("spin")
    assert stored is not None
    assert stored.status is TaskStatus.STOPPED
    assert [t.version for t in controller.store.history("sum")] == list(
        range(len(controller.store.history("sum")))
    )


def test_controlling_a_task_another_process_holds_names_the_missing_part(
    controller: Controller,
) -> None:
    now = controller.clock.now()
    foreign = TaskSnapshot(
        task_id="theirs",
        name="spin",
        status=TaskStatus.RUNNING,
        status_version=3,
        created_at=now,
        updated_at=now,
        owner="node-b",
        lease_owner="node-b",
    )
    controller.store.create(foreign)
    with pytest.raises(ConfigurationError, match=r"needs a store that implements CommandStore"):
        controller.stop("theirs", reason="from node-a")
    stored = controller.store.get("theirs")
    assert stored == foreign  # nothing written


def test_a_scheduler_names_the_missing_schedule_part(controller: Controller) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Scheduler(controller)
    message = str(caught.value)
    assert "needs a store that implements ScheduleStore" in message
    assert "TasksOnlyStore does not" in message
    assert "ScheduleStoreContract" in message  # what to do


def test_a_worker_names_the_missing_command_part(controller: Controller) -> None:
    with pytest.raises(ConfigurationError, match=r"a Worker .* implements CommandStore"):
        Worker(controller)
