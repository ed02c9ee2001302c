"""Write-through of every transition to the store, under optimistic concurrency (§8.9).

There is one write path. Every accepted transition is saved to the store, with the
snapshot after it, under ``expect_version``, by the thread that delivers it, and the
controller announces it (subscribers, ``wait()``, metrics) only after that save
returned. So when a call returns, its effect is stored and visible to every reader,
in this process or another. Concurrent writers are batched only by the store itself
(SQLite's group commit: each caller returns after the COMMIT that holds its write).
The snapshot carries this controller's lease (``lease_owner``, ``lease_until``),
because ``save`` overwrites the lease fields with the snapshot's.

A store failure never fails a task: the task is fine, only its record is behind. The
failure is logged and kept in ``persist_failures`` (the last 20), never swallowed.
Transitions not yet stored stay pending and go out with the task's next successful
write, and a task whose creation failed is created by its next write.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from chongming_task.core.clock import Clock
from chongming_task.errors import ConfigurationError
from chongming_task.model import TaskSnapshot, Transition
from chongming_task.stores.base import TaskStore

__all__ = ["MAX_PERSIST_FAILURES", "PersistFailure", "WriteThrough"]

log = logging.getLogger("chongming_task.controller")

#: How many persist failures a controller keeps for inspection (guide §8.9).
MAX_PERSIST_FAILURES = 20
#: Locks shared by the writes of all tasks (one task always maps to one).
_STRIPES = 64


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
    """One task's write bookkeeping: set up by ``create``, then written under its stripe
    lock."""

    persisted: int | None = None
    """The version the store holds; ``None`` until the task was created there."""
    pending: tuple[Transition, ...] = ()
    """Accepted, not yet stored (a tuple: usually empty, and shared while it is)."""


class WriteThrough:
    """Persists the transitions of the tasks one controller holds."""

    def __init__(
        self,
        store: TaskStore,
        *,
        clock: Clock,
        owner: str,
        lease_ttl: float,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.lease_ttl = lease_ttl
        self.persist_failures: deque[PersistFailure] = deque(maxlen=MAX_PERSIST_FAILURES)
        self.failure_count = 0
        self._lock = threading.Lock()
        self._states: dict[str, _TaskState] = {}
        # The writes of one task are serialised by one of a few shared locks rather
        # than a lock per task: a busy controller holds 100,000 queued tasks.
        self._stripes = tuple(threading.Lock() for _ in range(_STRIPES))

    # ------------------------------------------------------------ failures

    def record(
        self,
        task_id: str | None,
        operation: str,
        error: BaseException,
        *,
        version: int | None = None,
        quiet: bool = False,
    ) -> None:
        """Keep and log a failed store operation (``quiet``: kept and counted, logged
        at debug level only -- a repeat of the failure logged just before)."""
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
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
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
        """Now plus the lease TTL: the expiry written with each live task."""
        return self.clock.now() + timedelta(seconds=self.lease_ttl)

    def stored_form(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        """The snapshot as stored: with this controller's lease while it is not terminal."""
        until = None if snapshot.status.is_terminal else self.lease_until()
        return snapshot.replace(lease_owner=self.owner, lease_until=until)

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition]) -> None:
        """Store a new task with its creation record(s).

        Raises:
            ConfigurationError: The store already has this task id (duplicates are refused).
        """
        self._create([(snapshot, transitions)], lambda stored: self.store.create(*stored[0]))

    def create_batch(self, entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]]) -> None:
        """Store new tasks with their creation records in one store call (one commit).

        Raises:
            ConfigurationError: An id is taken (here or in the store), or the store
                refused the batch: nothing of it is kept here either.
        """
        self._create(entries, self.store.create_batch)

    def _create(
        self,
        entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        store_them: Callable[[list[tuple[TaskSnapshot, tuple[Transition, ...]]]], None],
    ) -> None:
        """Register the tasks' bookkeeping, then ``store_them`` (their stored forms).

        A refusal (a taken id) undoes the registration and is raised; any other store
        failure never fails the tasks: it is recorded and they are created later.
        """
        states = [(snapshot, _TaskState(pending=tuple(records))) for snapshot, records in entries]
        with self._lock:
            taken = [snapshot.task_id for snapshot, _ in states if snapshot.task_id in self._states]
            if taken:
                raise ConfigurationError(
                    f"task id {taken[0]!r} already exists in this controller; "
                    "task ids are unique -- submit under a new id"
                    if len(taken) == 1
                    else f"task ids {taken} already exist in this controller; task ids are "
                    "unique -- submit under new ids"
                )
            for snapshot, state in states:
                self._states[snapshot.task_id] = state
        try:
            store_them([(self.stored_form(snapshot), state.pending) for snapshot, state in states])
        except ConfigurationError:
            with self._lock:
                for snapshot, _ in states:
                    self._states.pop(snapshot.task_id, None)
            raise
        except Exception as exc:  # a store failure never fails the tasks: stored later
            for snapshot, _ in states:
                self.record(snapshot.task_id, "create", exc, version=snapshot.status_version)
            return
        for snapshot, state in states:
            state.persisted = snapshot.status_version
            state.pending = ()

    def adopt(self, snapshot: TaskSnapshot) -> None:
        """Take over the writes of a task already stored at ``snapshot``'s version.

        A worker that claimed a queued task (the work queue) continues its history.

        Raises:
            ConfigurationError: This writer already has the task.
        """
        with self._lock:
            if snapshot.task_id in self._states:
                raise ConfigurationError(
                    f"task id {snapshot.task_id!r} already exists in this controller"
                )
            self._states[snapshot.task_id] = _TaskState(persisted=snapshot.status_version)

    def write(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Store ``transition`` and the snapshot after it (plus anything still pending).

        Returns once the store took the write, or once its failure was recorded.
        """
        # One dict lookup is atomic: the lock orders compound changes of ``_states``.
        state = self._states.get(transition.task_id)
        if state is None:
            return
        with self._stripes[hash(transition.task_id) % _STRIPES]:
            self._write_now(state, transition, snapshot)

    def _write_now(self, state: _TaskState, transition: Transition, snapshot: TaskSnapshot) -> None:
        """One ``save`` (or the late ``create``) of the task's pending transitions."""
        if state.persisted is not None and transition.version <= state.persisted:
            return  # already stored (delivered twice)
        state.pending = (*state.pending, transition)
        stored = self.stored_form(snapshot)
        if state.persisted is None:
            self._create_late(state, stored)
            return
        try:
            self.store.save(stored, expect_version=state.persisted, transitions=state.pending)
        except Exception as exc:  # conflicts too: another process changed the task
            self.record(snapshot.task_id, "save", exc, version=snapshot.status_version)
            return
        state.persisted = snapshot.status_version
        state.pending = ()

    def _create_late(self, state: _TaskState, stored: TaskSnapshot) -> None:
        """Create a task whose creation failed earlier, with all its pending history."""
        try:
            self.store.create(stored, state.pending)
        except Exception as exc:
            self.record(stored.task_id, "create", exc, version=stored.status_version)
            return
        state.persisted = stored.status_version
        state.pending = ()

    def is_current(self, task_id: str, version: int) -> bool:
        """Whether the store holds ``version`` of ``task_id`` as far as this writer knows."""
        with self._lock:
            state = self._states.get(task_id)
        return state is not None and state.persisted == version and not state.pending

    def forget(self, task_id: str) -> None:
        """Drop the bookkeeping of a pruned task."""
        with self._lock:
            self._states.pop(task_id, None)
