"""Write-through of every transition to the store, under optimistic concurrency (§8.9).

Every accepted transition reaches the store with the snapshot after it, under
``expect_version``, so another process reading the store sees the same trajectory as
this one. The snapshot carries this controller's lease (``lease_owner``,
``lease_until``), because ``save`` overwrites the lease fields with the snapshot's.

Writes go through a :class:`~chongming_task.controller.writequeue.WriteQueue`: on a
store with a native ``save_many`` (SQLite, PostgreSQL) concurrent transitions share
one commit and a task's consecutive transitions become one row update. A *durable*
write returns only once it is stored; the controller makes terminal transitions
durable (``wait()`` never returns before the store has the terminal state) and so are
the edges into an occupying state (``-> starting``: the store knows a body may run
before it does, which is what ``reconcile`` judges by); a task is created already
queued, or already starting when a slot was free at submission (``submit()`` returns
with the store showing it). The others (``-> running``,
progress of the state within an attempt) are deferred: stored by the next flush,
right away but not waited for.
A run's end that its thread follows by starting the next queued run (it carries
that run on, see ``Controller._end_carrying_on``) is queued with :meth:`write_along`
instead: the next run's durable ``-> starting`` stores both in one commit, and the
end is durable before its delivery goes on either way.
On a store without ``save_many`` every write is durable, exactly as before.

A store failure never fails a task: the task is fine, only its observability is
broken. The failure is logged and kept in ``persist_failures`` (the last 20), never
swallowed. Writes heal themselves: transitions not yet stored stay pending and go out
with the next successful write, and a task whose creation failed is created then.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import NamedTuple

from chongming_task.controller.writequeue import WriteQueue
from chongming_task.core.clock import Clock
from chongming_task.errors import ConfigurationError
from chongming_task.model import TaskSnapshot, Transition
from chongming_task.stores.base import SnapshotWrite, TaskStore

__all__ = ["MAX_PERSIST_FAILURES", "PersistFailure", "WriteThrough"]

log = logging.getLogger("chongming_task.controller")

#: How many persist failures a controller keeps for inspection (guide §8.9).
MAX_PERSIST_FAILURES = 20
#: Locks shared by the direct writes of all tasks (one task always maps to one).
_STRIPES = 64
#: How long a computed lease expiry is reused (see ``WriteThrough.lease_until``).
_LEASE_GRAIN = timedelta(milliseconds=1)


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
    lock (direct writes) or by the flush leader alone (batched writes)."""

    persisted: int | None = None
    """The version the store holds; ``None`` until the task was created there."""
    pending: tuple[Transition, ...] = ()
    """Accepted, not yet stored (a tuple: usually empty, and shared while it is)."""


class _Write(NamedTuple):
    transition: Transition
    snapshot: TaskSnapshot
    announce: bool
    """Call ``on_stored`` after the flush (the caller did not wait to do it itself)."""


#: Called with each deferred transition once its write was flushed (stored or failed).
OnStored = Callable[[Transition, TaskSnapshot], None]


class WriteThrough:
    """Persists the transitions of the tasks one controller holds."""

    def __init__(
        self,
        store: TaskStore,
        *,
        clock: Clock,
        owner: str,
        lease_ttl: float,
        on_stored: OnStored | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.lease_ttl = lease_ttl
        self.persist_failures: deque[PersistFailure] = deque(maxlen=MAX_PERSIST_FAILURES)
        self.failure_count = 0
        self.batching = type(store).save_many is not TaskStore.save_many
        """Whether the store batches ``save_many`` natively, so deferring writes pays."""
        self._on_stored = on_stored
        self._lock = threading.Lock()
        self._states: dict[str, _TaskState] = {}
        # Direct writes of one task are serialised by one of a few shared locks rather
        # than a lock per task: a busy controller holds 100,000 queued tasks.
        self._stripes = tuple(threading.Lock() for _ in range(_STRIPES))
        self._lease_cache: tuple[datetime, datetime] | None = None
        self._queue: WriteQueue[_Write] = WriteQueue(self._flush, name=f"chongming-writes[{owner}]")

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
        """Now plus the lease TTL, shared by the writes of the same millisecond.

        The value is computed at most once per :data:`_LEASE_GRAIN` and reused: a
        reused one is up to a millisecond *earlier* than a fresh one would be, so a
        lease can only look shorter than granted, never longer, and 100,000 queued
        tasks share a few hundred datetimes instead of holding one each.
        """
        now = self.clock.now()
        cached = self._lease_cache
        if cached is not None and timedelta(0) <= now - cached[0] < _LEASE_GRAIN:
            return cached[1]
        until = now + timedelta(seconds=self.lease_ttl)
        self._lease_cache = (now, until)
        return until

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

    def write(
        self, transition: Transition, snapshot: TaskSnapshot, *, durable: bool = True
    ) -> bool:
        """Persist ``transition`` and the snapshot after it (plus anything still pending).

        With ``durable`` (always, on a store without native ``save_many``) it returns
        once the write was flushed. Otherwise it returns at once and the write goes
        out with the next flush, which then calls ``on_stored`` for it.

        Returns:
            True if the caller must announce the transition itself (it was flushed
            now, or the task is unknown here), False if the flush will.
        """
        # One dict lookup is atomic: the lock orders compound changes of ``_states``,
        # and taking it here, three times per task from three threads, made it the
        # lock convoys formed on (a thread that holds it loses the GIL).
        state = self._states.get(transition.task_id)
        if state is None:
            return True
        if not self.batching:
            with self._stripes[hash(transition.task_id) % _STRIPES]:
                self._write_now(state, transition, snapshot)
            return True
        self._queue.put(_Write(transition, snapshot, not durable), durable=durable)
        return durable

    def write_along(
        self, transition: Transition, snapshot: TaskSnapshot
    ) -> Callable[[], None] | None:
        """Queue a write that must be durable, for the next flush of any thread.

        On a batching store only. The write is announced by the flush that stores it.
        Returns the call that makes it durable: it returns at once if a durable write
        made meanwhile took it along (that is the point: one commit for both), else it
        flushes it. ``None`` when the task is unknown here: nothing was queued, and the
        caller announces the transition itself.
        """
        state = self._states.get(transition.task_id)  # atomic, as in write()
        if state is None:
            return None
        return partial(
            self._queue.settle, self._queue.put_along(_Write(transition, snapshot, True))
        )

    def _write_now(self, state: _TaskState, transition: Transition, snapshot: TaskSnapshot) -> None:
        """One ``save`` (or the late ``create``) for a store without native batches."""
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

    def flush(self) -> None:
        """Write everything queued so far; returns when it is stored (or failed)."""
        self._queue.drain()

    def start_flusher(self) -> None:
        """Have the deferred-write flusher running (on a store that batches writes)."""
        if self.batching:
            self._queue.start_flusher()

    def hold_flusher(self) -> None:
        """Deferred writes wait for a flush by the caller (see ``WriteQueue.hold_flusher``)."""
        self._queue.hold_flusher()

    def resume_flusher(self) -> None:
        self._queue.resume_flusher()

    def close(self) -> None:
        """Flush the queue and stop its thread; later writes are flushed by their caller."""
        self._queue.close()

    @property
    def queued(self) -> int:
        """Deferred writes not yet taken by a flush."""
        return self._queue.pending

    def _flush(self, batch: list[_Write]) -> None:
        """Write a batch: per task, the newest snapshot with every pending transition."""
        try:
            self._flush_batch(batch)
        except Exception as exc:  # a bug must not strand the queue's waiters
            log.exception("write-through flush failed")
            self.record(None, "flush", exc)
        if self._on_stored is not None:
            for write in batch:
                if write.announce:
                    self._on_stored(write.transition, write.snapshot)

    def _flush_batch(self, batch: list[_Write]) -> None:
        newest: dict[str, TaskSnapshot] = {}
        with self._lock:
            states = {w.transition.task_id: self._states.get(w.transition.task_id) for w in batch}
        for transition, snapshot, _ in batch:
            state = states[transition.task_id]
            if state is None:
                continue  # pruned meanwhile
            if state.persisted is not None and transition.version <= state.persisted:
                continue  # already stored (delivered twice)
            state.pending = (*state.pending, transition)
            current = newest.get(transition.task_id)
            if current is None or snapshot.status_version >= current.status_version:
                newest[transition.task_id] = snapshot
        writes: list[SnapshotWrite] = []
        owners: list[tuple[_TaskState, TaskSnapshot]] = []
        for task_id, snapshot in newest.items():
            state = states[task_id]
            assert state is not None
            stored = self.stored_form(snapshot)
            if state.persisted is None:
                self._create_late(state, stored)
                continue
            writes.append(SnapshotWrite(stored, state.persisted, state.pending))
            owners.append((state, snapshot))
        if not writes:
            return
        try:
            results: list[BaseException | None] = list(self.store.save_many(writes))
        except Exception as exc:  # conflicts come back per write; this is the backend
            results = [exc] * len(writes)
        for (state, snapshot), result in zip(owners, results, strict=True):
            if result is None:
                state.persisted = snapshot.status_version
                state.pending = ()
            else:  # conflicts too: another process changed the task
                self.record(snapshot.task_id, "save", result, version=snapshot.status_version)

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
