"""The attempt loop of one run, and the verdict on each attempt's end.

The loop runs on the run's carrier: the task's own thread (ThreadExecutor), the
caller's thread (InlineExecutor), or a relay thread watching a child process
(ProcessExecutor). So the executing thread supervises itself, and a run needs no
extra thread unless a deadline has to be watched (see ``supervisor``).

Each attempt: ``starting`` -> the executor runs it -> :meth:`Driver.judge_locked`
turns its end into the next transition (``succeeded``, ``failed``, ``stopped``,
``skipped``, ``cancelled`` or ``retry_wait``) -> after a backoff measured on the
injected clock, the next attempt. A stop while waiting ends the run at once; a pause
while waiting parks the loop until resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Final

from chongming_task._checkpoint_gaps import GapRecorder
from chongming_task._model import Failure, FailureKind, Progress, ensure_json
from chongming_task._redact import redact_failure
from chongming_task._validation import check_outcome_size, escape_json_surrogates
from chongming_task.core.state_machine import Triggers
from chongming_task.errors import ConfigurationError, TaskCancelled
from chongming_task.policies import RetryDecision
from chongming_task.runtime._attempt import (
    SPENT_CALL,
    Attempt,
    AttemptEnd,
    Exited,
    InvalidResult,
    Raised,
    Returned,
)
from chongming_task.runtime._context import LogEntry, RuntimeContext, TaskSkipped, emit_task_log
from chongming_task.runtime._control import Control
from chongming_task.runtime._failures import (
    CarrierCrashed,
    crash_failure,
    describe_exit,
    exception_failure,
    is_retryable,
    result_failure,
    timeout_failure,
)
from chongming_task.runtime._state import RunState
from chongming_task.runtime._supervisor import Supervisor
from chongming_task.runtime._timers import EPSILON
from chongming_task.runtime.executors import AsyncCarrier
from chongming_task.states import TaskStatus

__all__ = ["Driver"]

log = logging.getLogger("chongming_task.run")

S = TaskStatus

_RESULT_HINT = (
    "; return JSON data (dict, list, str, int, float, bool, None) and pass large data "
    "by reference (a path, an object-store key)"
)


class Driver:
    """Runs attempts one after another and judges how each one ended."""

    __slots__ = ("_state", "_supervisor")

    def __init__(self, state: RunState, supervisor: Supervisor) -> None:
        self._state = state
        self._supervisor = supervisor

    # ------------------------------------------------------------ the loop

    def begin_attempt_locked(self) -> Attempt:
        """``-> starting`` with a fresh attempt (its own control flags and context)."""
        state = self._state
        machine = state.machine
        state.apply(machine.mark_starting, executor=state.executor.name)
        now = state.clock.monotonic()
        gaps = state.gaps
        if gaps is None:
            gaps = state.gaps = GapRecorder()
        gaps.last = now  # the first gap of an attempt runs from its start
        control = Control(beat=now, gaps=gaps)
        attempt = Attempt(
            owner=self,
            number=machine.snapshot.attempt,
            call=state.call,
            control=control,
            task_id=machine.task_id,
            task_name=machine.snapshot.name,
            artifact_root=state.artifact_root,
        )
        control.on_pause = lambda seq: self._attempt_pause_reached(attempt, seq)
        state.attempt = attempt
        return attempt

    def drive(self) -> None:
        """The carrier's body: attempts until the run is terminal or handed back."""
        state = self._state
        attempt = state.attempt
        try:
            while attempt is not None:
                end = state.executor.run_attempt(attempt)
                again = self.conclude(attempt, end)
                if isinstance(end, Raised) and isinstance(end.error, KeyboardInterrupt):
                    with state.lock:
                        state.driving = False
                    raise end.error
                if not again:
                    self._stop_driving()
                    return
                attempt = self._next_attempt(attempt)
        except Exception as exc:  # a bug of ours or an executor failure: never hang the run
            self.fail_internally(exc)

    def _stop_driving(self) -> None:
        with self._state.lock:
            self._state.driving = False

    def conclude(self, attempt: Attempt, end: AttemptEnd) -> bool:
        """Record how ``attempt`` ended; True if another attempt is due after a backoff."""
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            attempt.live = False
            attempt.stop_deadline = attempt.kill_deadline = None
            if attempt is not state.attempt:
                return False  # abandoned (lost): the run ended without this attempt
            again = not machine.status.is_terminal and self.judge_locked(attempt, end)
            if machine.status.is_terminal:
                self._let_go_locked(attempt)
            return again

    def _let_go_locked(self, attempt: Attempt) -> None:
        """Drop what an ended run no longer needs, now that its last attempt is over.

        A controller holds its terminal runs until ``prune()`` (guide §8.6), so whatever
        a finished run keeps stays in memory for hours: the task's arguments (a user's
        payload) and the attempt's control block (a condition, a lock and a closure
        that refers back to the attempt, a reference cycle only the garbage collector
        can free). Every long-lived container also makes each collection of CPython's
        cyclic GC longer; a finished no-op run kept 35 of them, now 21. Nothing reads
        them again: a terminal run never starts another attempt, and every reader of
        ``state.attempt`` treats ``None`` as "no attempt", as before the first start.
        """
        state = self._state
        attempt.control.on_pause = None  # breaks the attempt <-> control cycle
        state.attempt = None
        state.call = SPENT_CALL

    def _next_attempt(self, previous: Attempt) -> Attempt | None:
        while True:
            found = self._next_step(previous, None)
            if not isinstance(found, threading.Event):
                return found
            found.wait()

    def _next_step(
        self, previous: Attempt, wake: Callable[[], None] | None
    ) -> Attempt | threading.Event | None:
        """One look for the next attempt: it, ``None`` (no more), or what to wait on.

        ``wake``: a driver on the event loop waits for this call instead of an event
        (the look then returns the :data:`_WAITING` marker).
        """
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            handed = state.attempt
            if handed is not None and handed is not previous and handed.live:
                # The owner re-admitted the run while we waited (TaskRun._prepare_start
                # begins the attempt and hands it to this parked carrier).
                return handed
            status = machine.status
            now = state.clock.monotonic()
            if status.is_terminal:
                state.driving = False
                return None
            due = status is S.RETRY_WAIT and now >= state.retry_at - EPSILON
            if due or (status is S.QUEUED and not state.managed):
                return self.begin_attempt_locked()
            if state.managed and status in (S.QUEUED, S.PAUSED):
                state.driving = False  # the controller re-admits it with start()
                return None
            # The supervisor wakes us when the backoff is over (or on stop/pause).
            if wake is not None:
                state.wake_async_locked(wake)
                return _WAITING
            return state.wake_event_locked()

    # ------------------------------------------------------------ on the event loop

    def launch(self, name: str) -> None:
        """Start the attempt loop: on the shared event loop when the executor runs
        ``async def`` bodies there (:class:`AsyncCarrier`), else on its carrier."""
        executor = self._state.executor
        # getattr, not isinstance: a runtime Protocol check is slow once per run.
        launch_async = getattr(executor, "launch_async", None)
        if launch_async is not None:
            launch_async(self.adrive, name=name)
        else:
            executor.launch(self.drive, name=name)

    async def adrive(self, carrier: AsyncCarrier) -> None:
        """:meth:`drive` as a task of the event loop: the bodies are awaited there, and
        every state write (``running``, the verdict, the next attempt) runs on one of
        the carrier's helper threads, so the loop never waits on the store."""
        state = self._state
        attempt = state.attempt
        offload = carrier.offload
        try:
            while attempt is not None:
                end = await carrier.arun_attempt(attempt)
                if not await offload(self.conclude, attempt, end):
                    self._stop_driving()
                    return
                attempt = await self._anext_attempt(attempt, carrier)
        except Exception as exc:  # a bug of ours or an executor failure: never hang the run
            await offload(self.fail_internally, exc)

    async def _anext_attempt(self, previous: Attempt, carrier: AsyncCarrier) -> Attempt | None:
        loop = asyncio.get_running_loop()
        while True:
            woken: asyncio.Future[None] = loop.create_future()

            def wake(woken: asyncio.Future[None] = woken) -> None:
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                    loop.call_soon_threadsafe(_resolve, woken)

            found = await carrier.offload(self._next_step, previous, wake)
            if found is not _WAITING:
                assert not isinstance(found, threading.Event)
                return found
            await woken

    def fail_internally(self, exc: BaseException) -> None:
        """End the run honestly after an internal error instead of leaving it hanging."""
        log.error("internal error while running task %s", self._state.machine.task_id, exc_info=exc)
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            state.driving = False
            if machine.status.is_terminal:
                return
            failure = exception_failure(exc, None, retryable=False)
            if machine.status is S.PAUSED:
                state.apply(machine.mark_cancelled, reason=failure.message, failure=failure)
            elif machine.can(S.FAILED):
                state.apply(machine.mark_failed, failure)
            else:
                state.apply(machine.mark_cancelled, reason=failure.message, failure=failure)
            self._supervisor.stop_attempt_locked(failure.message, "cancel")

    # ------------------------------------------------------------ verdicts

    def judge_locked(self, attempt: Attempt, end: AttemptEnd) -> bool:
        state = self._state
        machine = state.machine
        if machine.status is S.PAUSED and state.hand_back is not None and _at_checkpoint(end):
            self._hand_back_paused_locked(state.hand_back)
            return False
        if machine.status is S.PAUSED:
            # Only a dead child process ends an attempt while paused in place.
            state.apply(
                machine.resume, reason="the attempt ended while paused", trigger="runtime:ended"
            )
        if isinstance(end, Returned):
            return self._returned_locked(end.value)
        if isinstance(end, InvalidResult):
            self._settle_pausing_locked(attempt)
            state.apply(machine.mark_failed, result_failure(end.message + _RESULT_HINT))
            return False
        if machine.status is S.STOPPING:
            self._stopped_locked(attempt, end)
            return False
        self._settle_pausing_locked(attempt)
        scope = attempt.timeout_scope
        if scope is not None and state.timeout is not None:
            failure = timeout_failure(
                state.timeout, scope, retryable=self._supervisor.timeout_retryable(scope)
            )
            decision = (
                state.retry.decide(None, attempt.number, timeout_scope=scope)
                if failure.retryable
                else RetryDecision(False)
            )
            trigger = f"supervisor:timeout_{scope}"
            return self._fail_or_retry_locked(failure, decision, trigger=trigger)
        if isinstance(end, Raised):
            error = end.error
            if isinstance(error, TaskSkipped):
                state.apply(machine.body_skipped, reason=error.reason)
                return False
            if isinstance(error, TaskCancelled):  # raised by the body itself, not by a request
                state.apply(machine.mark_cancelled, reason=str(error), trigger="runtime:cancelled")
                return False
            failure = exception_failure(
                error, end.traceback, retryable=is_retryable(state.retry, error)
            )
            return self._fail_or_retry_locked(failure, state.retry.decide(error, attempt.number))
        crashed = CarrierCrashed(describe_exit(end.exitcode, end.pid))
        failure = crash_failure(end.exitcode, end.pid, retryable=is_retryable(state.retry, crashed))
        return self._fail_or_retry_locked(failure, state.retry.decide(crashed, attempt.number))

    def _returned_locked(self, value: object) -> bool:
        state = self._state
        machine = state.machine
        attempt = state.attempt
        if attempt is not None:
            self._settle_pausing_locked(attempt)
        try:
            ensure_json(value, f"the result of task {machine.snapshot.name!r}")
            # A file name from os.listdir may hold a lone surrogate: kept as its escape.
            value = escape_json_surrogates(value)
            # Refused here, before the terminal write, not by the store after it (§8.13).
            check_outcome_size(value, f"the result of task {machine.snapshot.name!r}")
        except ConfigurationError as exc:
            state.apply(machine.mark_failed, result_failure(f"{exc}{_RESULT_HINT}"))
            return False
        if machine.status is S.STARTING:
            state.apply(machine.mark_running)
        state.value = value
        state.apply(machine.mark_succeeded, outcome=value)
        return False

    def _stopped_locked(self, attempt: Attempt, end: AttemptEnd) -> None:
        state = self._state
        machine = state.machine
        control = attempt.control
        cancelled = (
            attempt.hard_stopped
            and isinstance(end, Raised)
            and isinstance(end.error, asyncio.CancelledError)
        )
        if (
            isinstance(end, Raised)
            and not cancelled
            and not isinstance(end.error, TaskCancelled | TaskSkipped)
        ):
            failure = exception_failure(end.error, end.traceback, retryable=False)
            state.apply(machine.mark_failed, failure)
            return
        if isinstance(end, Exited) and not attempt.hard_stopped:
            state.apply(machine.mark_failed, crash_failure(end.exitcode, end.pid, retryable=False))
            return
        requested = control.stop_reason if control.stop_source == "stop" else None
        if isinstance(end, Exited):
            how = (
                f"{describe_exit(end.exitcode, end.pid)} after it did not stop within the "
                f"{state.graceful_stop:g}s graceful window"
            )
        elif cancelled:
            how = (
                f"cancelled at an await after it did not reach a checkpoint within the "
                f"{state.graceful_stop:g}s graceful window"
            )
        else:
            how = "stopped at a checkpoint"
            if state.hand_back is not None:  # a worker's shutdown: back to the queue
                actor, reason = state.hand_back
                state.apply(machine.hand_back, actor=actor, reason=reason)
                return
        state.apply(
            machine.mark_stopped,
            reason=how,
            failure=_cancelled_failure(requested, how),
        )

    def _hand_back_paused_locked(self, hand_back: tuple[str | None, str]) -> None:
        """A pause in place whose body a worker's shutdown released: still paused, unheld.

        Two stored transitions: ``paused -> queued`` keeps the owner (nobody may claim
        it yet), then ``queued -> paused`` lets it go. Resuming it later sends it to
        the queue (it has no started attempt any more), on whichever worker claims it.
        """
        state = self._state
        machine = state.machine
        actor, reason = hand_back
        state.apply(machine.hand_back, actor=actor, reason=reason)
        machine.update(owner=None, lease_owner=None, lease_until=None)
        state.apply(
            machine.mark_paused,
            actor=actor,
            reason=f"{reason}: handed back still paused",
            trigger=Triggers.REPAUSED,
        )

    def _fail_or_retry_locked(
        self, failure: Failure, decision: RetryDecision, *, trigger: str | None = None
    ) -> bool:
        state = self._state
        machine = state.machine
        if decision.retry:
            if trigger is None:
                state.apply(machine.mark_retry_wait, failure, delay=decision.delay)
            else:
                state.apply(machine.mark_retry_wait, failure, delay=decision.delay, trigger=trigger)
            state.retry_at = state.clock.monotonic() + decision.delay
            return True
        if trigger is None:
            state.apply(machine.mark_failed, failure)
        else:
            state.apply(machine.mark_failed, failure, trigger=trigger)
        return False

    def _settle_pausing_locked(self, attempt: Attempt) -> None:
        """An attempt that ends while ``pausing`` never paused: roll the pause back first."""
        state = self._state
        if state.machine.status is S.PAUSING:
            state.apply(
                state.machine.abort_pause,
                reason="the attempt ended before it reached a checkpoint",
            )
            attempt.control.cancel_pause()

    # ------------------------------------------------------------ executor hooks

    def _attempt_context(self, attempt: Attempt) -> RuntimeContext:
        state = self._state
        return RuntimeContext(
            task_id=attempt.task_id,
            task_name=attempt.task_name,
            attempt=attempt.number,
            control=attempt.control,
            monotonic=state.clock.monotonic,
            host=attempt,
            upstream=attempt.call.upstream,
            artifact_root=attempt.artifact_root,
            children=state.children,
        )

    def _attempt_running(self, attempt: Attempt, pid: int | None = None) -> None:
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            if attempt is not state.attempt or not attempt.live:
                return
            if pid is not None and not machine.status.is_terminal and machine.snapshot.pid != pid:
                machine.update(pid=pid)
            # A stop (e.g. an expired start timeout) already pending: no `running`.
            if machine.status is S.STARTING and not attempt.control.stop_requested:
                state.apply(machine.mark_running)
                self._supervisor.body_began_locked(attempt)

    def _attempt_pause_reached(self, attempt: Attempt, seq: int) -> bool:
        state = self._state
        with state.transaction(self._supervisor.check_locked) as machine:
            control = attempt.control
            if attempt is not state.attempt or seq != control.pause_seq:
                return False
            if machine.status is S.PAUSED:
                return True
            if machine.status is not S.PAUSING or not control.pause_requested:
                return False
            state.apply(machine.mark_paused)
            attempt.paused_since = state.clock.monotonic()
            return True

    def _attempt_pid(self, attempt: Attempt, pid: int) -> None:
        with self._state.lock:
            machine = self._state.machine
            current = attempt is self._state.attempt and not machine.status.is_terminal
            if current and machine.snapshot.pid != pid:
                machine.update(pid=pid)

    def _attempt_beat(self, attempt: Attempt) -> None:
        attempt.control.beat = self._state.clock.monotonic()

    def _attempt_progress(self, attempt: Attempt, progress: Progress) -> None:
        state = self._state
        with state.lock:
            if attempt is state.attempt and not state.status.is_terminal:
                state.machine.update(progress=progress)
                highest = attempt.progress_done
                if highest is None or progress.done > highest:  # ``no_progress`` restarts
                    attempt.progress_done = progress.done
                    attempt.progress_at = state.clock.monotonic()
                    attempt.progress_paused = attempt.paused_total

    def _attempt_log(
        self, attempt: Attempt, level: int, message: str, at: datetime | None, stacklevel: int
    ) -> None:
        state = self._state
        state.add_log(LogEntry(at or state.clock.now(), level, message, attempt.number))
        emit_task_log(
            attempt.task_id,
            attempt.task_name,
            attempt.number,
            level,
            message,
            stacklevel=stacklevel + 1,
        )

    def _recent_logs(self) -> list[LogEntry]:
        return self._state.log_entries()


#: What :meth:`Driver._next_step` returns to a driver on the event loop that must wait.
_WAITING: Final = threading.Event()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _at_checkpoint(end: AttemptEnd) -> bool:
    """Whether the body ended by honouring a stop at a checkpoint."""
    return isinstance(end, Raised) and isinstance(end.error, TaskCancelled)


def _cancelled_failure(requested: str | None, how: str) -> Failure:
    message = f"stop requested: {requested}" if requested else "stop requested"
    if how != "stopped at a checkpoint":
        message = f"{message}; {how}"
    return redact_failure(Failure(kind=FailureKind.CANCELLED, message=message, retryable=False))
