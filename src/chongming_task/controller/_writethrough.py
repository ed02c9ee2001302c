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
failure is logged and kept in ``persist_failures`` (the last 20), never swallowed, and
the write is kept (per task, in order: the latest snapshot plus every history record not
yet stored) and retried with backoff on a background thread until the store takes it
(``pending()``); a task whose creation failed is created then. The call that caused the
write returns either way, and the transition is announced after the attempt. A conflict
(the store holds a version we did not write: another process moved the task on, e.g.
reconcile called it lost while we could not write) ends the retries, loudly: the
store's record stands, and a terminal state that could not be written is kept as a
late result in the task's audit (``controller.late_results``). The limit: pending
writes live in this process's memory, so a process killed while writes are pending
leaves those tasks to reconcile (``lost``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from chongming_task._model import TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task.controller._late_results import record_late_result
from chongming_task.core import Clock
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, DuplicateTaskId
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore

__all__ = ["MAX_PERSIST_FAILURES", "PendingWrite", "PersistFailure", "WriteThrough"]

log = logging.getLogger("chongming_task.controller")

#: How many persist failures a controller keeps for inspection (guide §8.9).
MAX_PERSIST_FAILURES = 20
#: Statuses in which a task without an owner is nobody's (``TaskRun.hand_back``).
_UNHELD = frozenset({TaskStatus.QUEUED, TaskStatus.PAUSED})
#: Locks shared by the writes of all tasks (one task always maps to one).
_STRIPES = 64
#: Backoff of the retries of a failed write: doubles from the first to the last.
RETRY_BASE = 0.05
RETRY_MAX = 1.0


@public
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


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingWrite:
    """A task whose latest state this process holds but the store does not yet.

    Kept (per task, in order: the latest snapshot plus every history record not yet
    stored) and retried with backoff until the store takes it (guide §8.9).
    """

    task_id: str
    status: str
    """The status of the snapshot waiting to be written (the truth)."""
    version: int
    """Its ``status_version``."""
    stored_version: int | None
    """The version the store holds; ``None`` while the task's creation is pending."""
    transitions: int
    """History records not yet stored."""
    attempts: int
    """Failed attempts so far."""
    last_error: str
    """``ExceptionType: message`` of the last failed attempt."""


@dataclass(slots=True)
class _TaskState:
    """One task's write bookkeeping: set up by ``create``, then written under its stripe
    lock."""

    persisted: int | None = None
    """The version the store holds; ``None`` until the task was created there."""
    pending: tuple[Transition, ...] = ()
    """Accepted, not yet stored (a tuple: usually empty, and shared while it is)."""
    latest: TaskSnapshot | None = None
    """The snapshot to write while a write is pending (``None`` when none is)."""
    attempts: int = 0
    """Failed attempts of the pending write."""
    due: float = 0.0
    """``clock.monotonic()`` of the next retry."""
    last_error: str = ""
    forget: bool = False
    """Forget the task once its pending write is stored (it was pruned or let go)."""


class WriteThrough:
    """Persists the transitions of the tasks one controller holds.

    A write that fails is kept and retried on a background thread (started while
    there is something to retry, gone when there is not), with exponential backoff
    from ``RETRY_BASE`` to ``RETRY_MAX`` seconds of the injected clock.
    """

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
        self._backlog: dict[str, _TaskState] = {}  # pending writes, oldest failure first
        self._retrier = BackgroundService(
            f"chongming-writes[{owner}]", self._retry_pass, clock=clock, on_error=_pass_failed
        )
        # Tasks whose non-terminal write was given up while their run goes on here.
        self._given_up: set[str] = set()

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
        """The snapshot as stored: with this controller's lease while it is not terminal.

        A task handed back to the queue (``queued`` or ``paused`` with no owner: a
        worker's shutdown let it go) is stored without a lease: nobody holds it.
        """
        if snapshot.owner is None and snapshot.status in _UNHELD:
            return snapshot.replace(lease_owner=None, lease_until=None)
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
        failure never fails the tasks: it is recorded and retried until they are created.
        """
        states = [(snapshot, _TaskState(pending=tuple(records))) for snapshot, records in entries]
        with self._lock:
            taken = [snapshot.task_id for snapshot, _ in states if snapshot.task_id in self._states]
            if taken:
                raise DuplicateTaskId(
                    taken[0],
                    f"task id {taken[0]!r} already exists in this controller; "
                    "task ids are unique -- submit under a new id"
                    if len(taken) == 1
                    else f"task ids {taken} already exist in this controller; task ids are "
                    "unique -- submit under new ids",
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
        except Exception as exc:  # a store failure never fails the tasks: created later
            for snapshot, state in states:
                with self._stripes[hash(snapshot.task_id) % _STRIPES]:
                    if state.latest is None and state.persisted is None:
                        self._failed(state, snapshot, "create", exc)
            return
        for snapshot, state in states:
            with self._stripes[hash(snapshot.task_id) % _STRIPES]:
                if state.persisted is None:
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
                raise DuplicateTaskId(
                    snapshot.task_id,
                    f"task id {snapshot.task_id!r} already exists in this controller",
                )
            self._states[snapshot.task_id] = _TaskState(persisted=snapshot.status_version)

    def write(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Store ``transition`` and the snapshot after it (plus anything still pending).

        Returns once the store took the write, or once its failure was recorded: the
        write is then pending and retried in the background (see :meth:`pending`).
        """
        # One dict lookup is atomic: the lock orders compound changes of ``_states``.
        state = self._states.get(transition.task_id)
        if state is None:
            if transition.to_status.is_terminal and self._was_given_up(transition.task_id):
                # An earlier write of this run was given up: its end is a late result.
                record_late_result(self.store, snapshot, owner=self.owner, clock=self.clock)
            return
        with self._stripes[hash(transition.task_id) % _STRIPES]:
            if state.persisted is not None and transition.version <= state.persisted:
                return  # already stored (delivered twice)
            if state.pending and state.pending[-1].version >= transition.version:
                return  # already pending (delivered twice)
            state.pending = (*state.pending, transition)
            self._store_pending(state, snapshot)

    def _was_given_up(self, task_id: str) -> bool:
        with self._lock:
            found = task_id in self._given_up
            self._given_up.discard(task_id)
        return found

    def _store_pending(self, state: _TaskState, snapshot: TaskSnapshot) -> bool:
        """One ``save`` (or the late ``create``) of the task's pending transitions, under
        the task's stripe lock; whether the store took it."""
        stored = self.stored_form(snapshot)
        operation = "create" if state.persisted is None else "save"
        try:
            if state.persisted is None:
                self.store.create(stored, state.pending)
            else:
                self.store.save(stored, expect_version=state.persisted, transitions=state.pending)
        except (ConcurrencyConflict, ConfigurationError) as exc:
            # The store holds another version (or the id, for a create): either an
            # earlier attempt did commit before it failed, or another process changed
            # the task (reconcile called it lost while we could not write).
            if self._already_stored(snapshot):
                self._stored(state, snapshot)
                return True
            self._give_up(state, snapshot, operation, exc)
            return False
        except Exception as exc:
            self._failed(state, snapshot, operation, exc)
            return False
        self._stored(state, snapshot)
        return True

    def _already_stored(self, snapshot: TaskSnapshot) -> bool:
        try:
            found = self.store.get(snapshot.task_id)
        except Exception:
            return False
        return (
            found is not None
            and found.status_version == snapshot.status_version
            and found.status is snapshot.status
            and found.updated_at == snapshot.updated_at
        )

    def _stored(self, state: _TaskState, snapshot: TaskSnapshot) -> None:
        state.persisted = snapshot.status_version
        state.pending = ()
        if state.latest is not None:
            log.info(
                "store took the pending write of task %s (%s, version %d) after %d failed "
                "attempt(s)",
                snapshot.task_id,
                snapshot.status.value,
                snapshot.status_version,
                state.attempts,
                extra={"task_id": snapshot.task_id},
            )
        self._settle(state, snapshot.task_id)

    def _settle(self, state: _TaskState, task_id: str) -> None:
        state.latest = None
        state.attempts = 0
        state.last_error = ""
        with self._lock:
            self._backlog.pop(task_id, None)
            if state.forget and self._states.get(task_id) is state:
                del self._states[task_id]

    def _failed(
        self, state: _TaskState, snapshot: TaskSnapshot, operation: str, exc: BaseException
    ) -> None:
        state.latest = snapshot
        state.attempts += 1
        state.last_error = f"{type(exc).__name__}: {exc}"
        state.due = self.clock.monotonic() + min(
            RETRY_MAX, RETRY_BASE * 2 ** min(state.attempts - 1, 30)
        )
        self.record(
            snapshot.task_id,
            operation,
            exc,
            version=snapshot.status_version,
            quiet=state.attempts > 1,
        )
        with self._lock:
            self._backlog.setdefault(snapshot.task_id, state)
        self._retrier.ensure_started()  # after the backlog has it: see _retry_pass

    def _give_up(
        self, state: _TaskState, snapshot: TaskSnapshot, operation: str, exc: BaseException
    ) -> None:
        """The store moved on without us: retrying cannot succeed. Said loudly.

        A terminal state (a lost attempt's body that finished after all) is kept as a
        late result in the stored task's audit (``controller.late_results``).
        """
        self.record(snapshot.task_id, operation, exc, version=snapshot.status_version)
        if snapshot.status.is_terminal:
            if operation == "save":
                record_late_result(self.store, snapshot, owner=self.owner, clock=self.clock)
        elif operation == "save":
            with self._lock:  # the run goes on here: its end will be a late result
                self._given_up.add(snapshot.task_id)
        log.error(
            "task %s: its %s (version %d) cannot be stored any more -- the store changed "
            "it meanwhile (%s); the store's record stands",
            snapshot.task_id,
            snapshot.status.value,
            snapshot.status_version,
            f"{type(exc).__name__}: {exc}",
            extra={"task_id": snapshot.task_id},
        )
        state.pending = ()
        state.persisted = None
        state.forget = True
        self._settle(state, snapshot.task_id)

    # ------------------------------------------------------------ retries

    def pending(self) -> list[PendingWrite]:
        """The writes not yet stored, oldest failure first."""
        with self._lock:
            items = list(self._backlog.items())
        out = []
        for task_id, state in items:
            latest = state.latest
            if latest is None:
                continue
            out.append(
                PendingWrite(
                    task_id=task_id,
                    status=latest.status.value,
                    version=latest.status_version,
                    stored_version=state.persisted,
                    transitions=len(state.pending),
                    attempts=state.attempts,
                    last_error=state.last_error,
                )
            )
        return out

    def pending_ids(self) -> list[str]:
        """Ids of the tasks with a pending write (their lease must be kept alive)."""
        with self._lock:
            return list(self._backlog)

    def pending_snapshot(self, task_id: str) -> TaskSnapshot | None:
        """The snapshot waiting to be written for ``task_id``, if any (the truth)."""
        state = self._backlog.get(task_id)
        latest = None if state is None else state.latest
        return None if latest is None else self.stored_form(latest)

    def retry(self, *, everything: bool = False) -> float | None:
        """Retry every pending write that is due (all of them with ``everything``).

        Returns the seconds until the next one is due, ``None`` when none is pending.
        """
        now = self.clock.monotonic()
        with self._lock:
            items = list(self._backlog.items())
        for task_id, state in items:
            if not everything and state.due > now:
                continue
            with self._stripes[hash(task_id) % _STRIPES]:
                latest = state.latest
                if latest is not None:
                    self._store_pending(state, latest)
        with self._lock:
            dues = [state.due for state in self._backlog.values()]
        if not dues:
            return None
        return max(0.0, min(dues) - self.clock.monotonic())

    def flush(self, timeout: float) -> list[PendingWrite]:
        """Retry until nothing is pending or ``timeout`` seconds (of the clock) passed;
        returns what is still not written."""
        deadline = self.clock.monotonic() + timeout
        delay = self.retry(everything=True)
        while delay is not None:
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                break
            self.clock.wait(self._retrier.stop_event, min(delay, remaining))
            delay = self.retry()
        return self.pending()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the retry thread (pending writes stay listed in :meth:`pending`)."""
        self._retrier.stop(timeout)

    def _retry_pass(self) -> StepResult:
        """Retry what is due; wait for the next due one, or end while nothing is pending
        (a write failing later starts the thread again, :meth:`_failed`)."""
        delay = self.retry()
        return FINISHED if delay is None else delay

    def is_current(self, task_id: str, version: int) -> bool:
        """Whether the store holds ``version`` of ``task_id`` as far as this writer knows."""
        with self._lock:
            state = self._states.get(task_id)
        return state is not None and state.persisted == version and not state.pending

    def forget(self, task_id: str) -> None:
        """Drop the bookkeeping of a pruned task (once its pending write is stored)."""
        with self._lock:
            state = self._states.get(task_id)
            if state is None:
                return
            if task_id in self._backlog:
                state.forget = True
                return
            del self._states[task_id]


def _pass_failed(exc: Exception, failures: int) -> float:
    """Never let the retrier die: the writes would be stuck."""
    log.error("write retry pass failed; retrying", exc_info=exc)
    return RETRY_MAX
