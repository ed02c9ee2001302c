"""The shared, locked state of one run: its state machine, current attempt and outbox.

``TaskRun`` (the public handle), the driver (the attempt loop) and the supervisor
(timeouts, graceful windows) all work on one :class:`RunState`. Every state-machine
write goes through :meth:`RunState.apply` under :attr:`RunState.lock`, which keeps the
"single writer" invariant of guide §3.2 while several threads control the run.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from chongming_task._checkpoint_gaps import GapRecorder
from chongming_task.core import Clock
from chongming_task.core.state_machine import StateMachine
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.runtime._attempt import Attempt, TaskCall
from chongming_task.runtime._context import LOG_KEEP, ChildTasks, LogEntry
from chongming_task.runtime._events import Outbox
from chongming_task.states import TaskStatus

if TYPE_CHECKING:
    from chongming_task.runtime.executors import Executor

__all__ = ["RunState", "Supervision"]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class Supervision:
    """A run's policies and pending deadlines on the wall clock, for ``explain``."""

    timeout: Timeout | None
    graceful_stop: float
    stop_deadline: datetime | None
    """When the graceful window of a pending stop ends."""
    retry_at: datetime | None
    """When the backoff of ``retry_wait`` ends."""
    last_checkpoint_at: datetime | None
    """When the body last reached a checkpoint in its current attempt."""


class RunState:
    """Everything about one run that more than one thread touches."""

    __slots__ = (
        "_logs",
        "_seen",
        "_synced_beat",
        "_synced_gaps",
        "_wake",
        "_wake_async",
        "artifact_root",
        "attempt",
        "call",
        "children",
        "clock",
        "driving",
        "executor",
        "gaps",
        "graceful_stop",
        "hand_back",
        "lock",
        "machine",
        "managed",
        "outbox",
        "pause_event",
        "retry",
        "retry_at",
        "started",
        "submitted_at",
        "timeout",
        "value",
    )

    def __init__(
        self,
        *,
        machine: StateMachine,
        call: TaskCall,
        executor: Executor,
        clock: Clock,
        retry: RetryPolicy,
        timeout: Timeout | None,
        graceful_stop: float,
        artifact_root: Path | None,
        outbox: Outbox[Any],
        lock: threading.Lock | None = None,
    ) -> None:
        self.machine = machine
        self.call = call
        self.executor = executor
        self.clock = clock
        self.retry = retry
        self.timeout = timeout
        self.graceful_stop = graceful_stop
        self.artifact_root = artifact_root
        self.outbox = outbox
        self.lock = lock or threading.Lock()
        self.children: ChildTasks | None = None
        """How ``ctx.enqueue`` stores children (a task a worker claimed); ``None``: none."""
        self.attempt: Attempt | None = None
        """The latest attempt; it stays here after it ends (``attempt.live`` says so)."""
        self.value: Any = None
        """The body's return value once the run succeeded (the object itself, not JSON)."""
        # Made on first use: a queued run must stay small (100,000 of them wait in a
        # busy controller), and an empty deque or an Event costs about 1 KiB each.
        self._logs: deque[LogEntry] | None = None
        self._wake: threading.Event | None = None
        self._wake_async: Callable[[], None] | None = None
        self.started = False
        """``start()`` was called at least once."""
        self.driving = False
        """A carrier is running the attempt loop right now."""
        self.managed = False
        """Queued by someone (a controller) who calls ``start()`` again after a re-queue."""
        self.retry_at = 0.0
        self.submitted_at = clock.monotonic()
        self.pause_event: threading.Event | None = None
        self.hand_back: tuple[str | None, str] | None = None
        """``(actor, reason)`` of a worker shutdown that hands the task back to the
        queue once its body stops at a checkpoint (``TaskRun.hand_back``)."""
        self._seen = len(machine.transitions)
        self._synced_beat: float | None = None
        self.gaps: GapRecorder | None = None
        """Gaps between the checkpoints of every attempt; made by the first attempt."""
        self._synced_gaps = 0

    @property
    def status(self) -> TaskStatus:
        return self.machine.status

    # ------------------------------------------------------------ logs, wake-ups

    def add_log(self, entry: LogEntry) -> None:
        """Keep ``entry`` among the last ``LOG_KEEP`` (one attempt logs at a time)."""
        logs = self._logs
        if logs is None:
            logs = self._logs = deque(maxlen=LOG_KEEP)
        logs.append(entry)

    def log_entries(self) -> list[LogEntry]:
        """The kept log entries, oldest first."""
        logs = self._logs
        return [] if logs is None else list(logs)

    def wake_locked(self) -> None:
        """Tell the driver, waiting between attempts, to look again. Hold :attr:`lock`."""
        if self._wake is not None:
            self._wake.set()  # no event yet: nobody waits, and a waiter looks first
        wake = self._wake_async
        if wake is not None:
            self._wake_async = None
            wake()

    def wake_async_locked(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (once, without blocking) at the next :meth:`wake_locked`: how a
        driver on the event loop waits between attempts. Hold :attr:`lock`."""
        self._wake_async = wake

    def wake_event_locked(self) -> threading.Event:
        """A cleared event the driver waits on after releasing :attr:`lock`."""
        if self._wake is None:
            self._wake = threading.Event()
        else:
            self._wake.clear()
        return self._wake

    # ------------------------------------------------------------ writes

    def apply(self, op: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run one state-machine operation and queue its transitions. Hold :attr:`lock`."""
        self.sync_heartbeat_locked()
        try:
            return op(*args, **kwargs)
        finally:
            self._record_locked()

    def transaction(self, after: Callable[[], None] | None = None) -> _Transaction:
        """Hold the lock for a group of writes; run ``after`` under it, deliver outside it.

        Returns once the block's transitions reached the listeners (stored, under a
        controller): see ``Outbox.flush``.

        ``with state.transaction(check) as machine:`` -- ``after`` runs only if the block
        did not raise. (A class, not ``@contextmanager``: a run opens several per
        transition, and the generator machinery cost more than the work inside.)
        """
        return _Transaction(self, after)

    def _record_locked(self) -> None:
        fresh = self.machine.transitions_after(self._seen)
        if not fresh:
            return
        snapshot = self.machine.snapshot
        for record in fresh:
            self.outbox.put(record, snapshot)
        self._seen += len(fresh)
        status = snapshot.status
        if self.pause_event is not None and status is not TaskStatus.PAUSING:
            self.pause_event.set()  # confirmed, aborted or overtaken: pause() may look
            self.pause_event = None
        if status.is_terminal:
            self.wake_locked()

    def supervision_locked(self) -> Supervision:
        """The run's deadlines, moved from the monotonic clock to wall time. Hold the lock."""
        mono = self.clock.monotonic()
        wall = self.clock.now()

        def at(when: float | None) -> datetime | None:
            return None if when is None else wall + timedelta(seconds=when - mono)

        attempt = self.attempt
        live = attempt is not None and attempt.live
        gaps = self.gaps
        waiting = self.machine.status is TaskStatus.RETRY_WAIT
        checkpointed = None  # the attempt's last checkpoint, if it reached one
        if live and attempt is not None and gaps is not None and gaps.last != attempt.begun_at:
            checkpointed = gaps.last
        return Supervision(
            timeout=self.timeout,
            graceful_stop=self.graceful_stop,
            stop_deadline=at(attempt.stop_deadline) if live and attempt is not None else None,
            retry_at=at(self.retry_at) if waiting else None,
            last_checkpoint_at=at(checkpointed),
        )

    # ------------------------------------------------------------ heartbeat

    def sync_heartbeat_locked(self) -> None:
        """Copy the attempt's last beat into the snapshot (``last_heartbeat_at``), and
        the checkpoint gaps counted since the last look (``checkpoint_gaps``).

        Checkpoints only store a monotonic reading, which is what keeps them nearly
        free; the wall-clock timestamp is derived here, when someone looks.
        """
        attempt = self.attempt
        if attempt is None or attempt.started_at is None or self.machine.status.is_terminal:
            return
        gaps = self.gaps
        if gaps is not None:
            counted = gaps.changes
            if counted != self._synced_gaps:
                self._synced_gaps = counted
                self.machine.update(checkpoint_gaps=gaps.freeze())
        beat = attempt.control.beat
        if beat == self._synced_beat:
            return
        self._synced_beat = beat
        age = max(0.0, self.clock.monotonic() - beat)
        at = self.clock.now() - timedelta(seconds=age)
        self.machine.update(last_heartbeat_at=at)


class _Transaction:
    """The context manager of :meth:`RunState.transaction`."""

    __slots__ = ("_after", "_state")

    def __init__(self, state: RunState, after: Callable[[], None] | None) -> None:
        self._state = state
        self._after = after

    def __enter__(self) -> StateMachine:
        state = self._state
        state.lock.acquire()
        # The beat and the gaps counted since the last look go in with this block's
        # writes: a run's last checkpoints would otherwise miss its terminal row.
        state.sync_heartbeat_locked()
        return state.machine

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            try:
                if exc_type is None and self._after is not None:
                    self._after()
            finally:
                self._state.lock.release()
        finally:
            self._state.outbox.flush()
