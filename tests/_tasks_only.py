"""``TasksOnlyStore``: a third-party backend with the task part only, for tests.

It implements :class:`TaskRecordStore` and nothing else (no commands, no schedules, no
work queue), as a backend over a key-value service might. tests/stores/test_tasks_only_store.py
checks its contract and what refuses it; the dashboard and metrics tests check that
what reads a store degrades on it instead of failing.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from chongming_task import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._model import Progress, TaskSnapshot, Transition
from chongming_task.core._clock import Clock
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores._base import TaskNotFound, TaskQuery, TaskRecordStore
from chongming_task.stores._codec import check_outcome, require_aware

__all__ = ["TasksOnlyStore", "held_elsewhere"]

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


def held_elsewhere(task_id: str, now: datetime, *, holder: str = "node-b") -> TaskSnapshot:
    """A task ``running`` under another process's lease (what only a command can reach)."""
    when: dict[str, Any] = {"created_at": now, "updated_at": now, "status_version": 3}
    running = TaskSnapshot(task_id=task_id, name="spin", status=TaskStatus.RUNNING, **when)
    return running.replace(owner=holder, lease_owner=holder)
