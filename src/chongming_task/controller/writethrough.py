"""Write-through of every transition to the store, under optimistic concurrency (§8.9).

Each accepted transition becomes one ``store.save(snapshot, expect_version=...,
transitions=[...])``, so another process reading the store sees the same trajectory
as this one. The snapshot carries this controller's lease (``lease_owner``,
``lease_until``), because ``save`` overwrites the lease fields with the snapshot's.

A store failure never fails a task: the task is fine, only its observability is
broken. The failure is logged and kept in ``persist_failures`` (the last 20), never
swallowed. Writes heal themselves: transitions not yet stored stay pending and go out
with the next successful write, and a task whose creation failed is created then.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from chongming_task.core.clock import Clock
from chongming_task.errors import ConfigurationError
from chongming_task.model import TaskSnapshot, Transition
from chongming_task.stores.base import TaskStore

__all__ = ["MAX_PERSIST_FAILURES", "PersistFailure", "WriteThrough"]

log = logging.getLogger("chongming_task.controller")

#: How many persist failures a controller keeps for inspection (guide §8.9).
MAX_PERSIST_FAILURES = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistFailure:
    """One failed store operation, kept so the failure is visible, never silent."""

    task_id: str | None
    """The task concerned; ``None`` for controller-wide operations (lease renewal)."""
    operation: str
    """``create``, ``save``, ``touch``, ``renew_leases``, ``command``..."""
    error: str
    """``ExceptionType: message``."""
    at: datetime
    version: int | None = None
    """The ``status_version`` that was being written, for snapshot writes."""


@dataclass(slots=True)
class _TaskState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    persisted: int | None = None
    """The version the store holds; ``None`` until the task was created there."""
    pending: list[Transition] = field(default_factory=list)


class WriteThrough:
    """Persists the transitions of the tasks one controller holds."""

    def __init__(self, store: TaskStore, *, clock: Clock, owner: str, lease_ttl: float) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.lease_ttl = lease_ttl
        self.persist_failures: deque[PersistFailure] = deque(maxlen=MAX_PERSIST_FAILURES)
        self.failure_count = 0
        self._lock = threading.Lock()
        self._states: dict[str, _TaskState] = {}

    # ------------------------------------------------------------ failures

    def record(
        self,
        task_id: str | None,
        operation: str,
        error: BaseException,
        *,
        version: int | None = None,
    ) -> None:
        """Keep and log a failed store operation."""
        failure = PersistFailure(
            task_id=task_id,
            operation=operation,
            error=f"{type(error).__name__}: {error}",
            at=self.clock.now(),
            version=version,
        )
        with self._lock:
            self.persist_failures.append(failure)
            self.failure_count += 1
        log.warning(
            "store %s failed for task %s (the task itself is not affected): %s",
            operation,
            task_id,
            failure.error,
            extra={"task_id": task_id},
        )

    def failures(self) -> deque[PersistFailure]:
        """A copy of the kept failures (safe to iterate while tasks keep writing)."""
        with self._lock:
            return deque(self.persist_failures, maxlen=MAX_PERSIST_FAILURES)

    # ------------------------------------------------------------ writes

    def lease_until(self) -> datetime:
        return self.clock.now() + timedelta(seconds=self.lease_ttl)

    def stored_form(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        """The snapshot as stored: with this controller's lease while it is not terminal."""
        until = None if snapshot.is_terminal else self.lease_until()
        return snapshot.replace(lease_owner=self.owner, lease_until=until)

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        """Store a new task with its creation record(s).

        Raises:
            ConfigurationError: The store already has this task id (duplicates are refused).
        """
        state = _TaskState(pending=list(transitions))
        with self._lock:
            if snapshot.task_id in self._states:
                raise ConfigurationError(
                    f"task id {snapshot.task_id!r} already exists in this controller; "
                    "task ids are unique -- submit under a new id"
                )
            self._states[snapshot.task_id] = state
        with state.lock:
            try:
                self.store.create(self.stored_form(snapshot), state.pending)
            except ConfigurationError:
                with self._lock:
                    self._states.pop(snapshot.task_id, None)
                raise
            except Exception as exc:  # a store failure never fails the task
                self.record(snapshot.task_id, "create", exc, version=snapshot.status_version)
                return
            state.persisted = snapshot.status_version
            state.pending.clear()

    def write(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Persist ``transition`` and the snapshot after it (plus anything still pending)."""
        with self._lock:
            state = self._states.get(transition.task_id)
        if state is None:
            return
        with state.lock:
            if state.persisted is not None and transition.version <= state.persisted:
                return  # already stored (delivered twice)
            state.pending.append(transition)
            stored = self.stored_form(snapshot)
            try:
                if state.persisted is None:
                    self.store.create(stored, state.pending)
                else:
                    self.store.save(
                        stored, expect_version=state.persisted, transitions=state.pending
                    )
            except Exception as exc:  # conflicts too: another process changed the task
                operation = "create" if state.persisted is None else "save"
                self.record(snapshot.task_id, operation, exc, version=snapshot.status_version)
                return
            state.persisted = snapshot.status_version
            state.pending.clear()

    def is_current(self, task_id: str, version: int) -> bool:
        """Whether the store holds ``version`` of ``task_id`` as far as this writer knows."""
        with self._lock:
            state = self._states.get(task_id)
        return state is not None and state.persisted == version and not state.pending

    def forget(self, task_id: str) -> None:
        """Drop the bookkeeping of a pruned task."""
        with self._lock:
            self._states.pop(task_id, None)
